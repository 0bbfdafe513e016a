"""robust: optimise the robust-shaped reward attenuation(U) * (r * confidence - lambda * U) (`robust.*`)."""

from __future__ import annotations

import numpy as np

from hackable_rl.registry import register_method
from hackable_rl.verifiers.training_verifier import EnsembleRewards


@register_method("robust")
def robust(ensemble: EnsembleRewards, config) -> np.ndarray:
    """The shaped reward `verifiers.shaping` computed from the same ensemble."""
    return ensemble.shaped.shaped
