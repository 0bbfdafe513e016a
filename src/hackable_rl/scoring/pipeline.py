"""Scoring: the training verifier's verdicts, the method and the objective, combined into the reward
TRL sees.

    completions ─> TrainingVerifier (members ─> corruption ─> aggregate, disagreement)
                ─> method (config.method: what is optimised; `robust` shapes) ─> objective (reward components) ─> reward

The optimised reward *is* the objective's verifier component (the reward that declares
`needs("verifier_reward")`: `correctness_reward`) in training; a missing one is imputed with
`trainer.missing_reward_value` for optimisation only (the record keeps it missing). Every other
component is a plain reward function from `REWARDS`, given what it declares it needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import hackable_rl.methods  # noqa: F401  (registers the built-in methods)
import hackable_rl.rewards  # noqa: F401  (registers the built-in rewards)
from hackable_rl.answers.parsing import completion_text, parse_strict
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.registry import METHODS, REWARDS, build_reward
from hackable_rl.core.stats import mean
from hackable_rl.methods.robust import DEFAULT_SHAPING, ShapingSettings, shape_ensemble
from hackable_rl.scoring.objectives import build_objective
from hackable_rl.scoring.records import VerifierRecord
from hackable_rl.verifiers.training_verifier import EnsembleRewards, TrainingVerifier
from hackable_rl.verifiers.types import Example

__all__ = ["ScoredBatch", "VerifiedBatch", "RewardPipeline", "build_reward_pipeline"]

_EPS = 1e-12


@dataclass(frozen=True)
class VerifiedBatch:
    """The training verifier's output and what the method optimises from it."""

    ensemble: EnsembleRewards
    optimised: np.ndarray
    """[N] the method's reward (NaN = missing)."""


@dataclass(frozen=True)
class ScoredBatch:
    """What `RewardPipeline.score` returns for one batch."""

    rewards: list[float]
    """Final objective reward per completion (missing verifier rewards imputed)."""
    records: list[VerifierRecord]
    """One record per completion (see `hackable_rl.scoring.records`)."""
    counts: dict[str, float]
    """Per-batch counts and means; a mean over no available value is left out."""


def _shaping(method_settings: Any) -> ShapingSettings:
    """The shaping every batch's records keep: the method's own settings when they are the shaping's
    (a method that optimises the shaped reward), else the shaping's defaults."""
    return method_settings if isinstance(method_settings, ShapingSettings) else DEFAULT_SHAPING


class RewardPipeline:
    """Training verifier + method + objective, built once from the config."""

    def __init__(self, config: ExperimentConfig, tokenizer: Any = None):
        self.config = config
        self.method = METHODS.get(config.method)
        self.method_settings = self.method.settings_of(config)
        self.verifier = TrainingVerifier(config)
        self.shaping = _shaping(self.method_settings)
        self.members = self.verifier.members
        self.objective = build_objective(config)
        self._needs = {name: REWARDS.get(name).needs for name in self.reward_names()}
        self._components = {name: self._component(name, tokenizer) for name in self.reward_names()}

    def reward_names(self) -> list[str]:
        """The objective's reward components."""
        return list(self.objective.reward_names())

    def _component(self, name: str, tokenizer: Any) -> Callable[..., list[float | None]] | None:
        """The reward `name` with its static options bound; None for the verifier's own component."""
        needs = self._needs[name]
        if "verifier_reward" in needs:
            return None
        options = dict(self.config.rewards.kwargs.get(name, {}))
        if "tags" in needs:
            options.setdefault("open_tag", self.config.rewards.think_open)
            options.setdefault("close_tag", self.config.rewards.think_close)
        if "tokenizer" in needs and tokenizer is not None:
            options.setdefault("tokenizer", tokenizer)
        return build_reward(name, **options)

    def verify(self, texts: list[str], examples: list[Example]) -> VerifiedBatch:
        """The training verifier alone and the method's optimised reward."""
        ensemble = self.verifier.verify(texts, examples)
        optimised = np.asarray(self.method(ensemble, self.config, self.method_settings), dtype=float)
        return VerifiedBatch(ensemble, optimised)

    def score(
        self,
        completions: Sequence[Any],
        prompts: Sequence[Any],
        ids: Sequence[str],
        references: Sequence[str],
        metadata: Sequence[dict[str, Any]],
        **extra: Any,
    ) -> ScoredBatch:
        """Scores one batch; `extra` (TRL's log_metric, ...) is passed on to the reward components."""
        texts = [completion_text(completion) for completion in completions]
        _check_columns(len(texts), prompts=prompts, ids=ids, references=references, metadata=metadata)
        examples = [Example(str(i), r, m or {}) for i, r, m in zip(ids, references, metadata, strict=True)]
        verified = self.verify(texts, examples)
        fill = self.config.trainer.missing_reward_value
        imputed = [fill if math.isnan(value) else float(value) for value in verified.optimised]
        columns = {"prompts": prompts, "id": list(ids), "reference": list(references), "metadata": list(metadata),
                   **extra}
        components = self._compute_components(texts, imputed, columns)
        final = [float(value) for value in self.objective.combine(components, completions=texts, **columns)]
        records = self._records(texts, verified, components, final)
        return ScoredBatch(rewards=final, records=records, counts=_counts(records, verified.ensemble))

    def _compute_components(
        self, texts: list[str], imputed: list[float], columns: dict[str, Any]
    ) -> dict[str, list[float]]:
        components: dict[str, list[float]] = {}
        fill = self.config.trainer.missing_reward_value
        for name, reward in self._components.items():
            if reward is None:
                components[name] = imputed
                continue
            correctness = {"correctness": imputed} if "correctness" in self._needs[name] else {}
            values = reward(texts, **columns, **correctness)
            components[name] = [fill if value is None else float(value) for value in values]
        return components

    def _records(
        self, texts: list[str], verified: VerifiedBatch, components: dict[str, list[float]], final: list[float]
    ) -> list[VerifierRecord]:
        ensemble, spread = verified.ensemble, verified.ensemble.spread
        aggregate, optimised = _column(ensemble.aggregate), _column(verified.optimised)
        shaping = shape_ensemble(ensemble, self.verifier.aggregation, self.shaping)  # kept under every method
        robust_aggregate, shaped = _column(shaping.aggregate), _column(shaping.shaped)
        measures = {name: _column(values) for name, values in (
            ("U", spread.u), ("normalised_disagreement", spread.normalised), ("vote_entropy", spread.vote_entropy),
            ("confidence_dispersion", spread.confidence_dispersion), ("mean_confidence", spread.mean_confidence),
        )}
        open_tag, close_tag = self.config.rewards.think_open, self.config.rewards.think_close
        clean, seen = list(zip(*ensemble.clean, strict=True)), list(zip(*ensemble.seen, strict=True))  # [N][M]
        records = []
        for i, text in enumerate(texts):
            strict = parse_strict(text, open_tag, close_tag)
            records.append(VerifierRecord(
                strict=strict is not None,
                strict_answer=strict.answer if strict is not None else None,
                method=self.config.method,
                member_names=ensemble.names,
                clean=clean[i],
                seen=seen[i],
                reward=aggregate[i],
                disagreement={name: values[i] for name, values in measures.items()},
                robust_aggregate=robust_aggregate[i],
                shaped=shaped[i],
                optimised_reward=optimised[i],
                components={name: values[i] for name, values in components.items()},
                final_reward=final[i],
                missing=optimised[i] is None,
                suppressed=_suppressed(aggregate[i], optimised[i]),
                down_weighted=_down_weighted(aggregate[i], optimised[i]),
            ))
        return records


def _column(values: np.ndarray) -> list[float | None]:
    """An [N] array as Python floats, NaN as None (x != x only for NaN; records are JSON, JSON has no NaN)."""
    return [None if value != value else value for value in values.tolist()]


def _suppressed(aggregate_reward: float | None, optimised: float | None) -> bool:
    """A positive aggregate that the optimised (shaped) reward took to 0 or below."""
    return aggregate_reward is not None and optimised is not None and aggregate_reward > _EPS and optimised <= _EPS


def _down_weighted(aggregate_reward: float | None, optimised: float | None) -> bool:
    """Shaped below the aggregate but still positive."""
    return aggregate_reward is not None and optimised is not None and _EPS < optimised < aggregate_reward - _EPS


def _check_columns(count: int, **columns: Sequence[Any]) -> None:
    wrong = {name: len(values) for name, values in columns.items() if len(values) != count}
    if wrong:
        raise ValueError(f"columns {wrong} do not match the {count} completions")


_MEANS = {
    "mean_aggregate": lambda r: r.reward,
    "mean_shaped": lambda r: r.shaped,
    "mean_optimised": lambda r: r.optimised_reward,
    "mean_disagreement": lambda r: r.disagreement["U"],
    "mean_normalised_disagreement": lambda r: r.disagreement["normalised_disagreement"],
    "mean_vote_entropy": lambda r: r.disagreement["vote_entropy"],
    "mean_confidence_dispersion": lambda r: r.disagreement["confidence_dispersion"],
    "mean_confidence": lambda r: r.disagreement["mean_confidence"],
    "mean_final_reward": lambda r: r.final_reward,
}


def _counts(records: list[VerifierRecord], ensemble: EnsembleRewards) -> dict[str, float]:
    counts: dict[str, float] = {"completions": float(len(records))}
    for flag in ("missing", "suppressed", "down_weighted", "strict"):
        counts[flag] = float(sum(getattr(record, flag) for record in records))
    for name, read in _MEANS.items():
        value = mean([read(record) for record in records])
        if value is not None:
            counts[name] = value
    for name, clean, seen in zip(ensemble.names, ensemble.clean, ensemble.seen, strict=True):
        counts[f"member.{name}.corrupted"] = float(sum(s.reward != c.reward for c, s in zip(clean, seen, strict=True)))
        counts[f"member.{name}.missing"] = float(sum(s.reward is None for s in seen))
    return counts


def build_reward_pipeline(config: ExperimentConfig, tokenizer: Any = None) -> RewardPipeline:
    """The reward pipeline training calls: `pipeline.score(completions, prompts, ids, references, metadata)`."""
    return RewardPipeline(config, tokenizer)
