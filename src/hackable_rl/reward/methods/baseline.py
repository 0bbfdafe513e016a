"""baseline: optimise the aggregate verifier reward r as it is; the reference every other method of a
study is compared against (`report_role`)."""

from __future__ import annotations

import numpy as np

from hackable_rl.core.registry import REFERENCE, register_method
from hackable_rl.reward.ensemble import EnsembleRewards


@register_method("baseline", report_role=REFERENCE)
def baseline(ensemble: EnsembleRewards, config) -> np.ndarray:
    """r: the members' seen rewards aggregated by `verifier.aggregation`."""
    return ensemble.aggregate
