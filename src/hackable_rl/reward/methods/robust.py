"""robust: optimise the robust-shaped reward r_robust = attenuation(U) * (r * confidence - lambda * U).

The method owns its shaping: the training verifier hands every method the members' verdicts, their
aggregate and disagreement (`EnsembleRewards`), and `robust` shapes them with its settings
(`method_kwargs`, `ShapingSettings`). Each ingredient switches on alone: confidence weighting
(confidence = mean member confidence, else 1), the disagreement penalty (lambda, else 0),
conservative aggregation (`min` instead of `verifier.aggregation`), and the attenuation (`none`: 1,
`linear`: 1 - U, `exp`: exp(-k U)). The result lies in [-lambda, 1]; it is not clipped, as the spec's
formula is not. A shaped reward of 0 attenuates; GRPO still centres rewards within a group, so it
does not promise a zero gradient weight.

It hands back the shaped reward with the aggregate it started from (`Optimised` columns
`robust_aggregate` and `shaped`, which the records keep). A shaping variant is a method of its own in
one file that calls `robust` with the one ingredient it changes (`penalised`: how U enters the
penalty) and so keeps every setting (docs/extending.md, "A shaping variant";
tests/plugins/shaping_plugin.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from hackable_rl.core.bounds import NonNegativeFloat
from hackable_rl.core.registry import register_method
from hackable_rl.reward.ensemble import Disagreement, EnsembleRewards, aggregate
from hackable_rl.reward.types import Optimised

__all__ = ["ShapedRewards", "ShapingSettings", "attenuation", "linear", "robust", "robust_reward", "shape"]


class ShapingSettings(BaseModel):
    """The robust shaping's settings: the `robust` method's `method_kwargs` (and a shaping variant's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    confidence_weighting: bool = True
    """Multiply the reward by the mean member confidence."""
    disagreement_penalty: bool = True
    """Subtract lambda * U."""
    disagreement_lambda: NonNegativeFloat = 0.5
    """lambda: weight of the disagreement penalty."""
    conservative_aggregation: bool = False
    """Aggregate members with `min` instead of `verifier.aggregation`."""
    attenuation: Literal["none", "linear", "exp"] = "linear"
    """attenuation(U): 1, 1 - U, or exp(-k U)."""
    attenuation_k: NonNegativeFloat = 1.0
    """k of the exponential attenuation."""


def attenuation(u: np.ndarray, mode: str, k: float = 1.0) -> np.ndarray:
    """attenuation(U): 1, 1 - U, or exp(-k U)."""
    if mode == "none":
        return np.ones_like(u)
    if mode == "linear":
        return 1.0 - u
    if mode == "exp":
        return np.exp(-k * u)
    raise ValueError(f"unknown attenuation {mode!r}; valid: none, linear, exp")


def linear(u: np.ndarray) -> np.ndarray:
    """U as it is: the robust shaping's penalty is lambda * U."""
    return u


Penalised = Callable[[np.ndarray], np.ndarray]
"""How U enters the disagreement penalty, lambda * penalised(U) (`linear` for robust)."""


def robust_reward(
    reward: np.ndarray, u: np.ndarray, mean_confidence: np.ndarray, robust: ShapingSettings,
    penalised: Penalised = linear,
) -> np.ndarray:
    """The shaped reward [N] from the aggregate, U and the mean confidence (NaN stays NaN)."""
    confidence = mean_confidence if robust.confidence_weighting else np.ones_like(reward)
    penalty = robust.disagreement_lambda * penalised(u) if robust.disagreement_penalty else np.zeros_like(reward)
    return attenuation(u, robust.attenuation, robust.attenuation_k) * (reward * confidence - penalty)


@dataclass(frozen=True)
class ShapedRewards:
    """The robust method's inputs and output, each [N]."""

    aggregate: np.ndarray
    """The aggregate the shaping started from (`min` under conservative aggregation)."""
    shaped: np.ndarray
    """r_robust."""


def shape(
    rewards: np.ndarray, confidences: np.ndarray, spread: Disagreement, aggregation: str, robust: ShapingSettings,
    penalised: Penalised = linear,
) -> ShapedRewards:
    """Robust shaping of a batch: aggregate (conservatively if asked), then shape."""
    method = "min" if robust.conservative_aggregation else aggregation
    base = aggregate(rewards, confidences, method)
    return ShapedRewards(aggregate=base, shaped=robust_reward(base, spread.u, spread.mean_confidence, robust, penalised))


@register_method("robust", settings=ShapingSettings)
def robust(ensemble: EnsembleRewards, config, settings: ShapingSettings, penalised: Penalised = linear) -> Optimised:
    """The robust-shaped reward of the batch under this run's settings, with the aggregate it shaped
    (a variant passes its own `penalised`, and keeps every setting)."""
    shaped = shape(ensemble.rewards, ensemble.confidences, ensemble.spread, config.verifier.aggregation, settings,
                   penalised)
    return Optimised(shaped.shaped, {"robust_aggregate": shaped.aggregate, "shaped": shaped.shaped})
