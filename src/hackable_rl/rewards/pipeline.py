"""The reward pipeline: the one thing training calls.

Per batch: every ensemble member checks every completion (clean verdict), its corruption channel
(if any) turns that into the verdict training sees; the members' rewards aggregate, their
disagreement is measured, the robust shaping is computed; `config.method` picks the reward that is
optimised (baseline: the aggregate; robust: the shaped reward). That optimised reward *is* the
objective's `correctness_reward` component in training; a missing one is imputed with
`trainer.missing_reward_value` for optimisation only (the record keeps it missing). The objective
then combines the components into the final reward.

Everything per completion goes into a JSON-serialisable record so that training can log it whole.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hackable_rl.config import ExperimentConfig
from hackable_rl.registry import build_reward
from hackable_rl.rewards.functions import completion_text
from hackable_rl.rewards.parsing import parse_strict
from hackable_rl.verifiers.checkers import CheckerOptions, build_checker
from hackable_rl.verifiers.corruption import KeyedChannel, build_channel, corruption_key
from hackable_rl.verifiers.ensemble import aggregate, disagreement
from hackable_rl.verifiers.shaping import shape
from hackable_rl.verifiers.types import Checker, Example

__all__ = ["Member", "ScoredBatch", "RewardPipeline", "build_reward_pipeline"]

CORRECTNESS = "correctness_reward"
_TAGGED_REWARDS = {
    "format_tag_reward",
    "correctness_reward",
    "length_penalty_reward",
    "token_utilisation_reward",
}
_EPS = 1e-12


@dataclass(frozen=True)
class Member:
    """One ensemble member: a checker and, when corrupted, its keyed channel."""

    name: str
    checker_name: str
    checker: Checker
    channel: KeyedChannel | None


@dataclass(frozen=True)
class ScoredBatch:
    """What `RewardPipeline.score` returns for one batch."""

    rewards: list[float]
    """Final objective reward per completion (missing verifier rewards imputed)."""
    records: list[dict[str, Any]]
    """One JSON-serialisable record per completion (see docs/methodology.md)."""
    counts: dict[str, float]
    """Per-batch counts and means; a mean over no available value is left out."""


def build_members(config: ExperimentConfig) -> list[Member]:
    """The configured members, each corrupted by the configured channel when marked `corrupted`."""
    options = CheckerOptions.from_config(config)
    channel = build_channel(config.corruption, options)
    members = []
    for member in config.verifier.members:
        keyed = (
            KeyedChannel(channel, config.corruption_seed, member.name)
            if channel and member.corrupted
            else None
        )
        members.append(Member(member.name, member.checker, build_checker(member.checker, options), keyed))
    return members


class RewardPipeline:
    """Training verifier + objective, built once from the config."""

    def __init__(self, config: ExperimentConfig, tokenizer: Any = None):
        from hackable_rl.objectives import (
            build_objective,  # objectives import config only; kept local to avoid cycles
        )

        self.config = config
        self.members = build_members(config)
        self.objective = build_objective(config)
        self._tags = (config.rewards.think_open, config.rewards.think_close)
        self._components = {
            name: self._component(name, tokenizer) for name in self.reward_names() if name != CORRECTNESS
        }

    def reward_names(self) -> list[str]:
        """The objective's reward components (`correctness_reward` comes from the verifier)."""
        return list(self.objective.reward_names())

    def _component(self, name: str, tokenizer: Any) -> Callable[..., list[float | None]]:
        options = dict(self.config.rewards.kwargs.get(name, {}))
        if name in _TAGGED_REWARDS:
            options.setdefault("open_tag", self._tags[0])
            options.setdefault("close_tag", self._tags[1])
        if name in {"length_penalty_reward", "token_utilisation_reward"} and tokenizer is not None:
            options.setdefault("tokenizer", tokenizer)
        return build_reward(name, **options)

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
        verdicts, verifier = self.verify(texts, examples)
        optimised = verifier["optimised"]
        fill = self.config.trainer.missing_reward_value
        imputed = [fill if math.isnan(value) else float(value) for value in optimised]
        columns = {
            "prompts": prompts,
            "id": list(ids),
            "reference": list(references),
            "metadata": list(metadata),
            **extra,
        }
        components = self._compute_components(texts, imputed, columns)
        final = [float(value) for value in self.objective.combine(components, completions=texts, **columns)]
        records = self._records(texts, examples, verdicts, verifier, components, final)
        return ScoredBatch(rewards=final, records=records, counts=_counts(records, self.members))

    def verify(
        self, texts: list[str], examples: list[Example]
    ) -> tuple[list[tuple[list, list]], dict[str, np.ndarray]]:
        """The training verifier alone: every member's (clean, corrupted) verdicts, then aggregate,
        disagreement and shaping. `score` adds the objective's other rewards and the records."""
        verdicts = self._member_verdicts(texts, examples)
        return verdicts, self._verifier_rewards(verdicts)

    def _member_verdicts(self, texts: list[str], examples: list[Example]) -> list[tuple[list, list]]:
        """Per member: (clean verdicts, verdicts after corruption), one per completion.

        Members that share a checker share its clean verdicts (checkers are deterministic), and the
        per-completion half of the corruption hash is computed once for all members.
        """
        clean_by_checker: dict[str, list] = {}
        keys = None
        out = []
        for member in self.members:
            clean = clean_by_checker.get(member.checker_name)
            if clean is None:
                checker = member.checker
                clean = [checker(text, example) for text, example in zip(texts, examples, strict=True)]
                clean_by_checker[member.checker_name] = clean
            if member.channel is None:
                out.append((clean, clean))
                continue
            if keys is None:
                keys = [
                    corruption_key(example.id, text) for text, example in zip(texts, examples, strict=True)
                ]
            out.append((clean, member.channel.corrupt_batch(clean, texts, examples, keys)))
        return out

    def _verifier_rewards(self, verdicts: list[tuple[list, list]]) -> dict[str, np.ndarray]:
        """Aggregate, disagreement, shaped and optimised rewards, each [N] (NaN = missing)."""
        rewards = _matrix([[v.reward for v in seen] for _, seen in verdicts])  # [N, M]; None -> NaN
        confidences = _matrix([[v.confidence for v in seen] for _, seen in verdicts])  # [N, M]
        aggregation = self.config.verifier.aggregation
        aggregate_reward = aggregate(rewards, confidences, aggregation)
        spread = disagreement(rewards, confidences)
        shaped = shape(rewards, confidences, spread, aggregation, self.config.robust)
        optimised = aggregate_reward if self.config.method == "baseline" else shaped.shaped
        return {
            "aggregate": aggregate_reward,
            "U": spread.u,
            "normalised_disagreement": spread.normalised,
            "vote_entropy": spread.vote_entropy,
            "confidence_dispersion": spread.confidence_dispersion,
            "mean_confidence": spread.mean_confidence,
            "robust_aggregate": shaped.aggregate,
            "shaped": shaped.shaped,
            "optimised": optimised,
        }

    def _compute_components(
        self, texts: list[str], imputed: list[float], columns: dict[str, Any]
    ) -> dict[str, list[float]]:
        components: dict[str, list[float]] = {}
        for name in self.reward_names():
            if name == CORRECTNESS:
                components[name] = imputed
                continue
            reward = self._components[name]
            if name == "token_utilisation_reward":
                reward = functools.partial(reward, correctness=imputed)
            values = reward(texts, **columns)
            fill = self.config.trainer.missing_reward_value
            components[name] = [fill if value is None else float(value) for value in values]
        return components

    def _records(self, texts, examples, verdicts, verifier, components, final) -> list[dict[str, Any]]:
        open_tag, close_tag = self._tags
        # NaN -> None (x != x only for NaN): records are JSON, and JSON has no NaN.
        columns = {
            key: [None if value != value else value for value in verifier[key].tolist()] for key in verifier
        }
        member_keys = [_member_keys(member.name) for member in self.members]
        records = []
        for i, (text, example) in enumerate(zip(texts, examples, strict=True)):
            strict = parse_strict(text, open_tag, close_tag)
            aggregate_i, optimised_i = columns["aggregate"][i], columns["optimised"][i]
            record: dict[str, Any] = {
                "id": example.id,
                "parsed": strict.answer if strict is not None else None,
                "strict": strict is not None,
                "method": self.config.method,
            }
            for keys, (clean, seen) in zip(member_keys, verdicts, strict=True):
                before, after = clean[i], seen[i]
                record[keys[0]] = before.reward
                record[keys[1]] = before.confidence
                record[keys[2]] = after.reward
                record[keys[3]] = after.confidence
                record[keys[4]] = after.parsed
                record[keys[5]] = after.reason
            for key, values in columns.items():
                record[key] = values[i]
            for name, values in components.items():
                record[name] = values[i]
            record["final_reward"] = final[i]
            record["missing"] = optimised_i is None
            record["suppressed"] = _suppressed(aggregate_i, optimised_i)
            record["down_weighted"] = _down_weighted(aggregate_i, optimised_i)
            records.append(record)
        return records


@functools.lru_cache(maxsize=256)
def _member_keys(name: str) -> tuple[str, ...]:
    fields = ("clean_reward", "clean_confidence", "reward", "confidence", "parsed", "reason")
    return tuple(f"member.{name}.{field}" for field in fields)


def _suppressed(aggregate_reward: float | None, optimised: float | None) -> bool:
    """A positive aggregate that the optimised (shaped) reward took to 0 or below."""
    return (
        aggregate_reward is not None
        and optimised is not None
        and aggregate_reward > _EPS
        and optimised <= _EPS
    )


def _down_weighted(aggregate_reward: float | None, optimised: float | None) -> bool:
    """Shaped below the aggregate but still positive."""
    return (
        aggregate_reward is not None and optimised is not None and _EPS < optimised < aggregate_reward - _EPS
    )


def _matrix(per_member: list[list[float]]) -> np.ndarray:
    """[M][N] lists -> [N, M] array."""
    return np.array(per_member, dtype=float).reshape(len(per_member), -1).T


def _check_columns(count: int, **columns: Sequence[Any]) -> None:
    wrong = {name: len(values) for name, values in columns.items() if len(values) != count}
    if wrong:
        raise ValueError(f"columns {wrong} do not match the {count} completions")


def _mean(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def _counts(records: list[dict[str, Any]], members: list[Member]) -> dict[str, float]:
    counts: dict[str, float] = {"completions": float(len(records))}
    for flag in ("missing", "suppressed", "down_weighted", "strict"):
        counts[flag] = float(sum(record[flag] for record in records))
    means = {
        "mean_aggregate": "aggregate",
        "mean_shaped": "shaped",
        "mean_optimised": "optimised",
        "mean_disagreement": "U",
        "mean_normalised_disagreement": "normalised_disagreement",
        "mean_vote_entropy": "vote_entropy",
        "mean_confidence_dispersion": "confidence_dispersion",
        "mean_confidence": "mean_confidence",
        "mean_final_reward": "final_reward",
    }
    for name, key in means.items():
        value = _mean([record[key] for record in records])
        if value is not None:
            counts[name] = value
    for member in members:
        clean_key, _, reward_key, *_ = _member_keys(member.name)
        counts[f"member.{member.name}.corrupted"] = float(
            sum(record[reward_key] != record[clean_key] for record in records)
        )
        counts[f"member.{member.name}.missing"] = float(sum(record[reward_key] is None for record in records))
    return counts


def build_reward_pipeline(config: ExperimentConfig, tokenizer: Any = None) -> RewardPipeline:
    """The reward pipeline training calls: `pipeline.score(completions, prompts, ids, references, metadata)`."""
    return RewardPipeline(config, tokenizer)
