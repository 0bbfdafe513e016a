"""A shaping variant as a plugin, in one file: `method: shaping_plugin:squared_penalty` shapes like
`robust` but penalises disagreement by lambda * U**2 (gentle on small splits, as harsh at U = 1), and
keeps every other setting of the robust shaping: it is `robust` with that one ingredient swapped."""

from __future__ import annotations

import numpy as np

from hackable_rl.core.registry import MethodSpec
from hackable_rl.reward.methods.robust import ShapingSettings, robust
from hackable_rl.reward.types import Optimised


def _squared_penalty(ensemble, config, settings: ShapingSettings) -> Optimised:
    """attenuation(U) * (r * confidence - lambda * U**2): robust's shaping, every setting of it, with a
    squared penalty (and robust's columns for the records: the aggregate it shaped, the shaped reward)."""
    return robust(ensemble, config, settings, penalised=np.square)


squared_penalty = MethodSpec(_squared_penalty, settings=ShapingSettings)
"""Its `method_kwargs` are the robust shaping's own (ShapingSettings), validated as robust's are."""
