"""What a real-model study will cost on 2 CPU cores, before it runs: `hackable-rl validate --study`.

A study on a pretrained model costs hours; one whose settings cannot fit its declared budget
(`budget_hours` in study.yaml) should say so at `validate`, not after a day. The estimate multiplies
the study's work (warm-start solutions, GRPO completions and test completions, each at its token
budget) by rates measured for that model in one lane (one thread, beside a second lane) of a 2-core
CPU (`MEASURED`, from the real-model study's own stages: pipelines/smollm2_study/README.md, "Cost"),
and divides by the two lanes. A model without measured rates gets no estimate. Plain Python: no torch.

Once a study has run, `measured_cost` adds up what its stages took, from the seconds each stage records
(a warm start's warmstart.json, a condition's condition.json): the report's "What the study cost".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.jsonl import read_json
from hackable_rl.study.records import BASE, IDENTICAL

__all__ = ["MEASURED", "MeasuredCost", "Rates", "StudyCost", "measured_cost", "study_cost"]

LANES = 2
"""Lanes side by side on 2 cores (`hackable-rl lanes`: one thread each)."""


@dataclass(frozen=True)
class Rates:
    """Seconds of one lane (one thread, beside a second lane on 2 cores) per unit of work, for one model
    at the study path's settings."""

    sft_example: float
    """One worked solution through a warm-start step (forward and backward)."""
    grpo_token: float
    """One completion token of a GRPO step's budget (completions x max_new_tokens): generation, loss, backward."""
    eval_token: float
    """One completion token of an evaluation's budget (sampled and greedy completions x max_new_tokens)."""
    load: float
    """Loading the model and starting a stage."""


MEASURED = {
    # 2-core AMD EPYC with avx512f and avx512_bf16, two one-thread lanes (pipelines/smollm2_learning's
    # pilots, 2026-12-06, the quiet stretches of their logs): a warm start of 40 x 8 solutions about 720 s,
    # a GRPO step of 32 completions x 64 tokens about 23 s, an evaluation of 500 completions x 64 (100
    # prompts x 4 + greedy) about 205 s. The 20-step study's lanes (pipelines/smollm2_study) had given
    # 18.5 s a step and 320 s per 1,000 completions, with other work beside them at times.
    "smollm2-135m-instruct": Rates(sft_example=720 / (40 * 8), grpo_token=23 / (32 * 64),
                                   eval_token=205 / (500 * 64), load=20.0),
}


@dataclass(frozen=True)
class StudyCost:
    """The estimate and its parts, in hours of wall time on 2 cores with two lanes."""

    warm_starts: float
    evaluations: float
    trainings: float

    @property
    def hours(self) -> float:
        return self.warm_starts + self.evaluations + self.trainings

    def describe(self) -> str:
        return (f"about {self.hours:.1f} h on 2 CPU cores with two lanes (warm starts {self.warm_starts:.1f} h, "
                f"trainings {self.trainings:.1f} h, evaluations {self.evaluations:.1f} h)")


def study_cost(config: Any, replicates: int, trained_arms: int) -> StudyCost | None:
    """The estimate for `replicates` x (a warm start, a base evaluation and `trained_arms` trainings
    each with its evaluation) under `config`; None for a model without measured rates."""
    rates = MEASURED.get(config.model.source)
    if rates is None:
        return None
    hour = 3600.0 * LANES  # the lanes share the work
    tokens = config.generation.max_new_tokens
    evaluation = config.evaluation
    prompts = evaluation.max_prompts or config.data.test_size or 0
    eval_completions = prompts * (evaluation.n + (1 if evaluation.greedy else 0))
    one_eval = rates.load + eval_completions * tokens * rates.eval_token
    warm = rates.load + config.warmstart.steps * config.warmstart.batch_size * rates.sft_example
    gate = config.capability.prompts * config.capability.k * tokens * rates.eval_token if config.capability.enabled else 0.0
    train = rates.load + gate + config.trainer.max_steps * config.trainer.effective_batch_size * tokens * rates.grpo_token
    per_replicate_warm = warm if config.warmstart.pretrained_sft else 0.0
    return StudyCost(warm_starts=replicates * per_replicate_warm / hour,
                     evaluations=replicates * (1 + trained_arms) * one_eval / hour,
                     trainings=replicates * trained_arms * train / hour)


@dataclass(frozen=True)
class MeasuredCost:
    """What a study's stages took, in hours of one lane each (a stage runs in one lane), as they recorded it.
    Two lanes side by side share the wall time, so kept busy they finish in about half the lane-hours."""

    warm_starts: int
    warm_start_hours: float
    base_evaluations: int
    base_hours: float
    trained_conditions: int
    trained_hours: float
    """Training and the test evaluation of each trained condition (its checkpoints' evaluations included)."""
    training_hours: float
    """Of `trained_hours`, the GRPO training itself (`train.seconds`), where the condition recorded it."""

    @property
    def lane_hours(self) -> float:
        return self.warm_start_hours + self.base_hours + self.trained_hours

    @property
    def wall_hours(self) -> float:
        """The lane-hours over the lanes: the wall time of two lanes kept busy."""
        return self.lane_hours / LANES

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"lane_hours": self.lane_hours, "wall_hours_two_lanes": self.wall_hours}

    def describe(self) -> str:
        return (f"{self.lane_hours:.1f} lane-hours, about {self.wall_hours:.1f} h of wall time on 2 CPU cores with two "
                f"lanes kept busy: {self.warm_starts} warm starts {self.warm_start_hours:.1f} h, {self.base_evaluations} "
                f"base evaluations {self.base_hours:.1f} h, {self.trained_conditions} trained conditions {self.trained_hours:.1f} h "
                f"(training {self.training_hours:.1f} h, the rest their evaluations and loading)")


def measured_cost(condition_files: list[Path], warm_start_files: list[Path]) -> MeasuredCost:
    """The seconds recorded by each condition (`seconds` in condition.json; an arm identical by
    construction to another ran nothing and counts nothing) and each warm start (`seconds.total` in
    warmstart.json), added up by kind. A condition resumed from a checkpoint records only its last run's
    seconds."""
    base, trained, training = [], [], []
    for path in condition_files:
        record = read_json(path)
        if record.get("status") == IDENTICAL or record.get("seconds") is None:
            continue
        if record["condition"].get("method") == BASE:
            base.append(float(record["seconds"]))
        else:
            trained.append(float(record["seconds"]))
            training.append(float((record.get("train") or {}).get("seconds") or 0.0))
    warm = [float(read_json(path)["seconds"]["total"]) for path in warm_start_files]
    return MeasuredCost(warm_starts=len(warm), warm_start_hours=sum(warm) / 3600, base_evaluations=len(base),
                        base_hours=sum(base) / 3600, trained_conditions=len(trained), trained_hours=sum(trained) / 3600,
                        training_hours=sum(training) / 3600)
