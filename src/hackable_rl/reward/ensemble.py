"""The ensemble, the reward's third step: the members' seen verdicts aggregated, and their
disagreement, vectorised over a batch (`combine` -> `EnsembleRewards`, what every method reads).

Rewards come as an array [N completions, M members] with NaN where a member's reward is missing;
confidences as [N, M]. Aggregations are registered in AGGREGATIONS: `f(rewards, confidences) -> [N]`. Every statistic runs over the members *with* a reward; a row with none
gives NaN (missing) for the aggregate and for every disagreement measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hackable_rl.core.registry import AGGREGATIONS, RegistryError, register_aggregation
from hackable_rl.reward.types import Verdict

__all__ = ["aggregate", "combine", "Disagreement", "disagreement", "EnsembleRewards"]

Rates = tuple[float | None, float | None]
"""(rho0, rho1): P(a wrong answer is paid), P(a right one is denied); None where unknown."""


def _present(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    present = ~np.isnan(rewards)  # [N, M]
    return present, present.sum(axis=1)  # [N]


def _row_mean(values: np.ndarray, present: np.ndarray, counts: np.ndarray) -> np.ndarray:
    total = np.where(present, values, 0.0).sum(axis=1)  # [N]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, total / counts, np.nan)


def _votes(rewards: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Members per row whose reward is >= 0.5."""
    return (present & (np.nan_to_num(rewards, nan=0.0) >= 0.5)).sum(axis=1)


@register_aggregation("mean")
def mean(rewards: np.ndarray, confidences: np.ndarray) -> np.ndarray:
    """Mean of the present members' rewards."""
    present, counts = _present(rewards)
    return _row_mean(rewards, present, counts)


@register_aggregation("min")
def minimum(rewards: np.ndarray, confidences: np.ndarray) -> np.ndarray:
    """The lowest present reward (the conservative aggregation)."""
    present, counts = _present(rewards)
    lowest = np.where(present, rewards, np.inf).min(axis=1)
    return np.where(counts > 0, lowest, np.nan)


@register_aggregation("majority")
def majority(rewards: np.ndarray, confidences: np.ndarray) -> np.ndarray:
    """1 when more than half the present members vote >= 0.5, else 0 (a tie is 0)."""
    present, counts = _present(rewards)
    majority_vote = (2 * _votes(rewards, present) > counts).astype(float)
    return np.where(counts > 0, majority_vote, np.nan)


@register_aggregation("confidence_weighted")
def confidence_weighted(rewards: np.ndarray, confidences: np.ndarray) -> np.ndarray:
    """sum c r / sum c over present members; all-zero confidence is missing."""
    present, _ = _present(rewards)
    weights = np.where(present, confidences, 0.0)  # [N, M]
    weight_sum = weights.sum(axis=1)
    weighted = (weights * np.nan_to_num(rewards, nan=0.0)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight_sum > 0, weighted / weight_sum, np.nan)


def aggregate(rewards: np.ndarray, confidences: np.ndarray, method: str) -> np.ndarray:
    """The aggregate reward per row [N] by the registered aggregation `method` (NaN: missing)."""
    try:
        combine = AGGREGATIONS.get(method)
    except RegistryError as error:
        raise ValueError(str(error)) from None
    return np.asarray(combine(rewards, confidences), dtype=float)


@dataclass(frozen=True)
class Disagreement:
    """Per-row disagreement measures, each [N] with NaN where no member has a reward."""

    u: np.ndarray
    """U = 4 x population variance of the rewards, in [0, 1]."""
    normalised: np.ndarray
    """Share of members whose vote (reward >= 0.5) differs from the majority vote."""
    vote_entropy: np.ndarray
    """Entropy in bits of the share of votes >= 0.5."""
    confidence_dispersion: np.ndarray
    """Population standard deviation of the confidences."""
    mean_confidence: np.ndarray
    """Mean confidence (the robust shaping's confidence)."""


def disagreement(rewards: np.ndarray, confidences: np.ndarray) -> Disagreement:
    """The four disagreement measures of the spec plus the mean confidence, over present members."""
    present, counts = _present(rewards)
    mean = _row_mean(rewards, present, counts)
    spread = np.where(present, rewards - mean[:, None], 0.0)
    variance = _row_mean(spread * spread, present, counts)
    votes = _votes(rewards, present)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(counts > 0, votes / counts, np.nan)
    majority = 2 * votes > counts
    dissent = np.where(majority, counts - votes, votes)
    with np.errstate(invalid="ignore", divide="ignore"):
        normalised = np.where(counts > 0, dissent / counts, np.nan)
    mean_confidence = _row_mean(confidences, present, counts)
    confidence_spread = np.where(present, confidences - mean_confidence[:, None], 0.0)
    confidence_variance = _row_mean(confidence_spread * confidence_spread, present, counts)
    return Disagreement(
        u=4.0 * variance,
        normalised=normalised,
        vote_entropy=_binary_entropy(share),
        confidence_dispersion=np.sqrt(confidence_variance),
        mean_confidence=mean_confidence,
    )


def _binary_entropy(share: np.ndarray) -> np.ndarray:
    """H(p) in bits; 0 at p in {0, 1}; NaN stays NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = (share > 0) & (share < 1)
        p = np.where(inside, share, 0.5)
        entropy = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return np.where(np.isnan(share), np.nan, np.where(inside, entropy, 0.0))


@dataclass(frozen=True)
class EnsembleRewards:
    """The training verifier's output for a batch of N completions (arrays are [N]; NaN = missing)."""

    names: tuple[str, ...]
    """The members, in config order."""
    clean: list[list[Verdict]]
    """[M][N] each member's verdict before its corruption channel."""
    seen: list[list[Verdict]]
    """[M][N] the verdicts training sees (after corruption)."""
    rewards: np.ndarray
    """[N, M] the members' seen rewards."""
    confidences: np.ndarray
    """[N, M] the members' seen confidences."""
    aggregate: np.ndarray
    """r: the seen rewards aggregated by `verifier.aggregation` (the observed reward)."""
    spread: Disagreement
    noise_rates: tuple[Rates, ...]
    """[M] each member's known (rho0, rho1) (`verifier.member_noise_rates`), read once when the verifier is built."""


def combine(names: tuple[str, ...], clean: list[list[Verdict]], seen: list[list[Verdict]], aggregation: str,
            noise_rates: tuple[Rates, ...]) -> EnsembleRewards:
    """The members' seen verdicts ([M][N]) as [N, M] rewards and confidences, aggregated by
    `aggregation`, with their disagreement."""
    rewards = _matrix([[verdict.reward for verdict in verdicts] for verdicts in seen])  # [N, M]
    confidences = _matrix([[verdict.confidence for verdict in verdicts] for verdicts in seen])  # [N, M]
    return EnsembleRewards(names, clean, seen, rewards, confidences, aggregate(rewards, confidences, aggregation),
                           disagreement(rewards, confidences), noise_rates)


def _matrix(per_member: list[list[float | None]]) -> np.ndarray:
    """[M][N] lists (None -> NaN) -> [N, M] array."""
    return np.array(per_member, dtype=float).reshape(len(per_member), -1).T
