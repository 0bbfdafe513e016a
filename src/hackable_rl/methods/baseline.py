"""baseline: optimise the aggregate verifier reward r as it is."""

from __future__ import annotations

import numpy as np

from hackable_rl.registry import register_method
from hackable_rl.verifiers.training_verifier import EnsembleRewards


@register_method("baseline")
def baseline(ensemble: EnsembleRewards, config) -> np.ndarray:
    """r: the members' seen rewards aggregated by `verifier.aggregation`."""
    return ensemble.aggregate
