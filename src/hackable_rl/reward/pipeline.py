"""The reward, from a completion to the float TRL sees: the story in one screen.

    TRL ─> ObjectiveReward(prompts, completions, id, reference, metadata_json)
        ─> RewardPipeline.score, one batch:
             1. each member's checker: its clean verdict                     TrainingVerifier.check   (verifier.py, checkers.py)
             2. its corruption channel: the verdict training sees            TrainingVerifier.corrupt (corruption.py)
             3. the ensemble: the aggregate r and the disagreement          combine                  (ensemble.py)
             4. the method: the optimised reward, and what it computed      config.method            (methods/)
             5. the objective's components (the optimised reward is one)    Components               (objectives.py, functions.py)
             6. combined by the objective: the float TRL sees               objective.combine        (objectives.py)
        ─> one record per completion (records.py) with GRPO's advantage (advantages.py) and the judge's verdict

A missing optimised reward (every member missing) is imputed with `trainer.missing_reward_value`
for optimisation only: the record keeps it missing. The CLI's training (`training.run`) and the
public `trl_parts.verifier_reward` both build an `ObjectiveReward` over this pipeline
(`ObjectiveReward.of`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

import hackable_rl.reward.methods  # noqa: F401  (registers the built-in methods)
from hackable_rl.answers.parsing import completion_text
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.registry import METHODS
from hackable_rl.reward.advantages import group_advantages, kept_group_means
from hackable_rl.reward.ensemble import EnsembleRewards, combine
from hackable_rl.reward.objectives import Components, build_objective
from hackable_rl.reward.records import GenerationRecord, VerifierRecord, batch_counts, verifier_records
from hackable_rl.reward.types import Example, Judgment, Optimised
from hackable_rl.reward.verifier import TrainingVerifier

__all__ = ["ObjectiveReward", "RewardPipeline", "ScoredBatch", "VerifiedBatch", "build_reward_pipeline"]


@dataclass(frozen=True)
class VerifiedBatch:
    """Steps 1 to 4: the ensemble of the members' verdicts, and what the method handed back."""

    ensemble: EnsembleRewards
    method: Optimised

    @property
    def optimised(self) -> np.ndarray:
        """[N] the method's reward (NaN = missing)."""
        return self.method.reward


@dataclass(frozen=True)
class ScoredBatch:
    """What `RewardPipeline.score` returns for one batch."""

    rewards: list[float]
    """Final objective reward per completion (missing verifier rewards imputed)."""
    records: list[VerifierRecord]
    """One record per completion (`records.VerifierRecord`)."""
    counts: dict[str, float]
    """Per-batch counts and means (`records.batch_counts`)."""


class RewardPipeline:
    """Training verifier + method + objective, built once from the config."""

    def __init__(self, config: ExperimentConfig, tokenizer: Any = None):
        self.config = config
        self.verifier = TrainingVerifier(config)
        self.method = METHODS.get(config.method)
        self.method_settings = self.method.settings_of(config)
        self.objective = build_objective(config)
        self.components = Components(config, self.reward_names(), tokenizer)

    def reward_names(self) -> list[str]:
        """The objective's reward components."""
        return list(self.objective.reward_names())

    def verify(self, texts: list[str], examples: list[Example]) -> VerifiedBatch:
        """Steps 1 to 4: the members' verdicts, corrupted, combined, and the method's optimised reward."""
        clean = self.verifier.check(texts, examples)  # 1. [M][N]
        seen = self.verifier.corrupt(clean, texts, examples)  # 2. [M][N]
        ensemble = combine(self.verifier.names, clean, seen, self.verifier.aggregation, self.verifier.noise_rates)  # 3.
        return VerifiedBatch(ensemble, Optimised.of(self.method(ensemble, self.config, self.method_settings)))  # 4.

    def score(self, completions: Sequence[Any], prompts: Sequence[Any], ids: Sequence[str],
              references: Sequence[str], metadata: Sequence[dict[str, Any]], **extra: Any) -> ScoredBatch:
        """Scores one batch; `extra` (TRL's log_metric, ...) is passed on to the reward components."""
        texts = [completion_text(completion) for completion in completions]
        _check_columns(len(texts), prompts=prompts, ids=ids, references=references, metadata=metadata)
        examples = [Example(str(i), r, m or {}) for i, r, m in zip(ids, references, metadata, strict=True)]
        verified = self.verify(texts, examples)  # 1-4
        fill = self.config.trainer.missing_reward_value
        imputed = [fill if math.isnan(value) else float(value) for value in verified.optimised]
        columns = {"prompts": prompts, "id": list(ids), "reference": list(references), "metadata": list(metadata),
                   **extra}
        components = self.components(texts, imputed, columns)  # 5.
        final = [float(value) for value in self.objective.combine(components, completions=texts, **columns)]  # 6.
        records = verifier_records(texts, self.config.method, verified.ensemble, verified.method, components, final,
                                   self.config.rewards.think_open, self.config.rewards.think_close)
        return ScoredBatch(rewards=final, records=records, counts=batch_counts(records, verified.ensemble))

    def keeps_group_mean(self) -> bool:
        """Whether the method's reward enters GRPO's advantage whole (`MethodSpec.keeps_group_mean`)."""
        return bool(self.method.keeps_group_mean(self.config))


def _check_columns(count: int, **columns: Sequence[Any]) -> None:
    wrong = {name: len(values) for name, values in columns.items() if len(values) != count}
    if wrong:
        raise ValueError(f"columns {wrong} do not match the {count} completions")


def build_reward_pipeline(config: ExperimentConfig, tokenizer: Any = None) -> RewardPipeline:
    """The reward pipeline training calls: `pipeline.score(completions, prompts, ids, references, metadata)`."""
    return RewardPipeline(config, tokenizer)


class RecordSink(Protocol):
    """Where the generation records go: the run's recorder, or the public reward's buffer."""

    def add(self, records: list[GenerationRecord]) -> None: ...


class ObjectiveReward:
    """The one reward function TRL sees (its contract; `__name__` names its column in TRL's logs): the
    pipeline's final rewards, and as a side effect one generation record per completion, with the
    advantage GRPO will use and the independent judge's verdict (analysis only: it never reaches the
    return value)."""

    __name__ = "objective_reward"

    def __init__(self, pipeline: RewardPipeline, sink: RecordSink, judge: Callable[[str, str], Judgment],
                 group_size: int, scale_rewards: str, count_tokens: Callable[[str], int | None]):
        self.pipeline = pipeline
        self.sink = sink
        self.judge = judge
        self.group_size = group_size
        self.scale_rewards = scale_rewards
        self.count_tokens = count_tokens
        self.last_records: list[GenerationRecord] = []
        """The last call's records, as handed to the sink (the public reward reads them: trl_parts)."""
        self.kept_means: list[float] | None = None
        """The last batch's group means to add to TRL's advantages, or None (training/trainer.py)."""

    @classmethod
    def of(cls, pipeline: RewardPipeline, sink: RecordSink, judge: Callable[[str, str], Judgment],
           count_tokens: Callable[[str], int | None]) -> ObjectiveReward:
        """The reward over `pipeline`, with GRPO's group size and reward scaling from its config."""
        trainer = pipeline.config.trainer
        return cls(pipeline, sink, judge, trainer.num_generations, trainer.scale_rewards, count_tokens)

    def __call__(self, prompts: list[str], completions: list[str], completion_ids: list[list[int]] | None = None,
                 id: list[str] | None = None,  # noqa: A002 - the dataset column is called `id`
                 reference: list[str] | None = None, metadata_json: list[str] | None = None, **_: Any) -> list[float]:
        metadata = [json.loads(text) for text in metadata_json] if metadata_json is not None else [{}] * len(completions)
        scored = self.pipeline.score(completions, prompts, id, reference, metadata)
        advantages = group_advantages(scored.rewards, self.group_size, self.scale_rewards)
        self.kept_means = None
        if self.pipeline.keeps_group_mean():  # the trainer adds them to TRL's advantages (training/trainer.py)
            fill = self.pipeline.config.trainer.missing_reward_value
            self.kept_means = kept_group_means(scored.records, self.group_size, fill)
            advantages = [value + kept for value, kept in zip(advantages, self.kept_means, strict=True)]
        self.last_records = [
            GenerationRecord(
                step=None, prompt_id=id[index], prompt=prompts[index], completion=completion,
                reference=reference[index], prompt_tokens=self.count_tokens(prompts[index]),
                completion_tokens=len(completion_ids[index]) if completion_ids else None,
                verifier=scored.records[index], advantage=advantages[index],
                judgment=self.judge(completion, reference[index]),
            )
            for index, completion in enumerate(completions)
        ]
        self.sink.add(self.last_records)
        return list(scored.rewards)
