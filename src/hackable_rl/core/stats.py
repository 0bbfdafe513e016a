"""The one mean and the one hacking gap: every module that averages or measures the gap calls these.

Both leave undefined values out and return None (never 0, never NaN) when nothing is defined.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["mean", "hacking_gap"]


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the defined (not None) values; None when there are none."""
    defined = [float(value) for value in values if value is not None]
    return float(np.mean(defined)) if defined else None


def hacking_gap(rewards: Iterable[float | None], correct: Iterable[bool | float | None]) -> float | None:
    """mean(reward - correct) over the completions that have both a (normalised) training-verifier
    reward and an independent judgment (docs/metrics.md); None when none has both."""
    return mean(
        float(reward) - float(ok)
        for reward, ok in zip(rewards, correct, strict=True)
        if reward is not None and ok is not None
    )
