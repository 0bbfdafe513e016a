"""The one reward function TRL sees: training verifier -> objective, plus a full record per completion.

TRL calls it once per generation batch with every dataset column as a list (one entry per
completion). It returns the objective's reward (missing imputed for optimisation) and, as a side
effect, hands the recorder one record per completion: the verifier's full record, the advantage
GRPO will use, and the independent judge's verdict (analysis only: it never reaches the return value).

Why the advantage is computed twice, here and in TRL: TRL computes its advantages inside its
`_generate_and_score_completions`, after the reward function returns, and keeps them in the batch
it trains on without exposing them to callbacks; overriding that method would tie the project to
one TRL version's internals. So the records compute the same formula (`group_advantages`: TRL's
group centring and `scale_rewards` scaling) from the same rewards, at the same moment.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hackable_rl.scoring.records import GenerationRecord
from hackable_rl.training.recorder import GenerationRecorder


def group_advantages(rewards: list[float], group_size: int, scale: str) -> list[float]:
    """The advantages TRL computes from these rewards (one reward function, weight 1).

    advantage = r - mean(group); divided by the group (or batch) std + 1e-4 unless scale is
    `none`, which the spec keeps for both methods (a group where every reward is equal then
    contributes no gradient, whatever the reward's scale).
    """
    values = np.asarray(rewards, dtype=np.float64).reshape(-1, group_size)  # [prompts, G]
    centred = values - values.mean(axis=1, keepdims=True)
    if scale == "group":
        centred = centred / (values.std(axis=1, ddof=1, keepdims=True) + 1e-4)
    elif scale == "batch":
        centred = centred / (values.std(ddof=1) + 1e-4)
    return centred.reshape(-1).tolist()


def group_means(values: list[float], group_size: int) -> list[float]:
    """Each completion's group mean of `values` (what a method that keeps it adds to the advantage)."""
    grouped = np.asarray(values, dtype=np.float64).reshape(-1, group_size)
    return np.repeat(grouped.mean(axis=1), group_size).tolist()


def method_keeps_group_mean(pipeline: Any) -> bool:
    """Whether the pipeline's method keeps the group mean in the advantage under its config
    (`MethodSpec.keeps_group_mean`)."""
    return bool(pipeline.method.keeps_group_mean(pipeline.config))


def kept_group_means(pipeline: Any, records: list[Any], group_size: int) -> list[float] | None:
    """The group mean of the optimised reward (missing imputed) per completion when the method keeps
    it in the advantage (`keeps_group_mean`, the forward correction); None for every other method."""
    if not method_keeps_group_mean(pipeline):
        return None
    fill = pipeline.config.trainer.missing_reward_value
    optimised = [fill if record.optimised_reward is None or math.isnan(record.optimised_reward)
                 else record.optimised_reward for record in records]
    return group_means(optimised, group_size)


class ObjectiveReward:
    """Callable with TRL's reward contract; `__name__` names its column in TRL's logs."""

    __name__ = "objective_reward"

    def __init__(
        self,
        pipeline: Any,
        recorder: GenerationRecorder,
        judge: Callable[[str, str], Any],
        group_size: int,
        scale_rewards: str,
        count_tokens: Callable[[str], int],
    ):
        self.pipeline = pipeline
        self.recorder = recorder
        self.judge = judge
        self.group_size = group_size
        self.scale_rewards = scale_rewards
        self.count_tokens = count_tokens
        self.last_records: list[GenerationRecord] = []
        """The last call's records, as handed to the recorder (the public reward reads them: trl_parts)."""
        self.kept_means: list[float] | None = None
        """The last batch's group means to add to TRL's advantages, or None (training/run.py)."""

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        completion_ids: list[list[int]] | None = None,
        id: list[str] | None = None,  # noqa: A002 - the dataset column is called `id`
        reference: list[str] | None = None,
        metadata_json: list[str] | None = None,
        **_: Any,
    ) -> list[float]:
        metadata = [json.loads(text) for text in metadata_json] if metadata_json is not None else [{}] * len(completions)
        scored = self.pipeline.score(completions, prompts, id, reference, metadata)
        advantages = group_advantages(scored.rewards, self.group_size, self.scale_rewards)
        self.kept_means = kept_group_means(self.pipeline, scored.records, self.group_size)
        if self.kept_means is not None:  # the trainer adds them to TRL's advantages (training/run.py)
            advantages = [value + kept for value, kept in zip(advantages, self.kept_means, strict=True)]
        records = [
            GenerationRecord(
                step=None,
                prompt_id=id[index],
                prompt=prompts[index],
                completion=completion,
                reference=reference[index],
                prompt_tokens=self.count_tokens(prompts[index]),
                completion_tokens=len(completion_ids[index]) if completion_ids else None,
                verifier=scored.records[index],
                advantage=advantages[index],
                judgment=self.judge(completion, reference[index]),
            )
            for index, completion in enumerate(completions)
        ]
        self.last_records = records
        self.recorder.add(records)
        return list(scored.rewards)
