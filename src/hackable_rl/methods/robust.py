"""robust: optimise the robust-shaped reward attenuation(U) * (r * confidence - lambda * U); its
settings (`method_kwargs`) are the shaping's own (`verifiers.shaping.ShapingSettings`)."""

from __future__ import annotations

import numpy as np

from hackable_rl.core.registry import register_method
from hackable_rl.verifiers.shaping import ShapingSettings
from hackable_rl.verifiers.training_verifier import EnsembleRewards


@register_method("robust", settings=ShapingSettings)
def robust(ensemble: EnsembleRewards, config, settings: ShapingSettings) -> np.ndarray:
    """The shaped reward `verifiers.shaping` computed from the same ensemble (the training verifier
    shapes with this method's settings: `scoring.build_reward_pipeline`)."""
    return ensemble.shaped.shaped
