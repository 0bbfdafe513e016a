"""A shaping variant as a plugin, in one file: `method: shaping_plugin:squared_penalty` shapes like
`robust` but penalises disagreement by lambda * U**2 (gentle on small splits, as harsh at U = 1), and
keeps every other setting of the robust shaping."""

from __future__ import annotations

import numpy as np

from hackable_rl.core.registry import MethodSpec
from hackable_rl.methods.robust import ShapingSettings, attenuation


def _squared_penalty(ensemble, config, settings: ShapingSettings) -> np.ndarray:
    """attenuation(U) * (r * confidence - lambda * U**2): robust's shaping with a squared penalty."""
    u = ensemble.spread.u
    confidence = ensemble.spread.mean_confidence if settings.confidence_weighting else np.ones_like(u)
    penalty = settings.disagreement_lambda * u**2 if settings.disagreement_penalty else np.zeros_like(u)
    return attenuation(u, settings.attenuation, settings.attenuation_k) * (ensemble.aggregate * confidence - penalty)


squared_penalty = MethodSpec(_squared_penalty, settings=ShapingSettings)
"""Its `method_kwargs` are the robust shaping's own (ShapingSettings), validated as robust's are."""
