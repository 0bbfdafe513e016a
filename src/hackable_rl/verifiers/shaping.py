"""Robust shaping: r_robust = attenuation(U) * (r * confidence - lambda * U).

Each ingredient switches on alone (`robust.*`): confidence weighting (confidence = mean member
confidence, else 1), the disagreement penalty (lambda, else 0), conservative aggregation (`min`
instead of `verifier.aggregation`), and the attenuation (`none`: 1, `linear`: 1 - U, `exp`:
exp(-k U)). The result lies in [-lambda, 1]; it is not clipped, as the spec's formula is not. A
shaped reward of 0 attenuates; GRPO still centres rewards within a group, so it does not promise a
zero gradient weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hackable_rl.verifiers.ensemble import Disagreement, aggregate

__all__ = ["attenuation", "robust_reward", "ShapedRewards", "shape"]


def attenuation(u: np.ndarray, mode: str, k: float = 1.0) -> np.ndarray:
    """attenuation(U): 1, 1 - U, or exp(-k U)."""
    if mode == "none":
        return np.ones_like(u)
    if mode == "linear":
        return 1.0 - u
    if mode == "exp":
        return np.exp(-k * u)
    raise ValueError(f"unknown attenuation {mode!r}; valid: none, linear, exp")


def robust_reward(reward: np.ndarray, u: np.ndarray, mean_confidence: np.ndarray, robust) -> np.ndarray:
    """The shaped reward [N] from the aggregate, U and the mean confidence (NaN stays NaN)."""
    confidence = mean_confidence if robust.confidence_weighting else np.ones_like(reward)
    penalty = robust.disagreement_lambda * u if robust.disagreement_penalty else np.zeros_like(reward)
    return attenuation(u, robust.attenuation, robust.attenuation_k) * (reward * confidence - penalty)


@dataclass(frozen=True)
class ShapedRewards:
    """The robust method's inputs and output, each [N]."""

    aggregate: np.ndarray
    """The aggregate the shaping started from (`min` under conservative aggregation)."""
    shaped: np.ndarray
    """r_robust."""


def shape(
    rewards: np.ndarray, confidences: np.ndarray, spread: Disagreement, aggregation: str, robust
) -> ShapedRewards:
    """Robust shaping of a batch: aggregate (conservatively if asked), then shape."""
    method = "min" if robust.conservative_aggregation else aggregation
    base = aggregate(rewards, confidences, method)
    return ShapedRewards(aggregate=base, shaped=robust_reward(base, spread.u, spread.mean_confidence, robust))
