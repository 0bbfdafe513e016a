"""The records of the reward, and those that carry it across a boundary: what the reward made of a
completion at every step (`VerifierRecord`, built by `verifier_records`), a training generation, an
evaluation sample. Frozen dataclasses, one naming scheme, one JSON form each.

The names, shared by both kinds of sample (docs/methodology.md lists every key):

- `correct`, `parsed`, `reason`: the independent judge's verdict (never a gradient);
- `reward`: the training verifier's aggregate reward r (the *observed* reward), `optimised_reward`
  what the method optimised (the aggregate for baseline, the shaped reward for robust), and beside
  them the columns the method handed back (`robust`: `robust_aggregate`, `shaped`);
- `strict`, `strict_answer`: whether the completion is in the strict format, and its boxed answer;
- `member.<name>.<field>`: each ensemble member's clean and corrupted verdict.

`to_json()` gives the flat JSON object written to JSONL (generations, eval samples) and MLflow tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hackable_rl.answers.parsing import parse_strict
from hackable_rl.core.stats import mean
from hackable_rl.reward.ensemble import EnsembleRewards
from hackable_rl.reward.types import Judgment, MemberVerdict, Optimised, Verdict

__all__ = ["VerifierRecord", "GenerationRecord", "EvaluationRecord", "verifier_records", "batch_counts"]

_EPS = 1e-12


@dataclass(frozen=True)
class VerifierRecord:
    """What the training verifier and the objective make of one completion (None: missing/undefined)."""

    strict: bool
    strict_answer: str | None
    method: str
    member_names: tuple[str, ...]
    clean: tuple[Verdict, ...]
    """Each member's verdict before its corruption channel (in `member_names` order)."""
    seen: tuple[Verdict, ...]
    """Each member's verdict after it: what training saw."""
    reward: float | None
    """The aggregate r of the members' (corrupted) rewards: the observed reward."""
    disagreement: dict[str, float | None]
    """U, normalised_disagreement, vote_entropy, confidence_dispersion, mean_confidence."""
    method_columns: dict[str, float | None]
    """What the method handed back beside its optimised reward (`Optimised.columns`; none for baseline)."""
    optimised_reward: float | None
    components: dict[str, float]
    """The objective's reward components (missing values imputed for optimisation)."""
    final_reward: float
    missing: bool
    suppressed: bool
    down_weighted: bool

    @property
    def members(self) -> tuple[MemberVerdict, ...]:
        return tuple(map(MemberVerdict, self.member_names, self.clean, self.seen))

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"strict": self.strict, "strict_answer": self.strict_answer, "method": self.method}
        for member in self.members:
            record.update(member.to_json())
        record.update(
            reward=self.reward, **self.disagreement, **self.method_columns,
            optimised_reward=self.optimised_reward, **self.components, final_reward=self.final_reward,
            missing=self.missing, suppressed=self.suppressed, down_weighted=self.down_weighted,
        )
        return record


@dataclass(frozen=True)
class GenerationRecord:
    """One completion sampled during training, as `generations/step-XXXXX.jsonl` holds it."""

    step: int | None
    """Optimiser step (filled in when the step ends)."""
    prompt_id: str
    prompt: str
    completion: str
    reference: str
    prompt_tokens: int
    completion_tokens: int | None
    verifier: VerifierRecord
    advantage: float
    """The advantage GRPO computes from the returned rewards (group mean subtracted)."""
    judgment: Judgment

    def at_step(self, step: int) -> GenerationRecord:
        return GenerationRecord(
            step, self.prompt_id, self.prompt, self.completion, self.reference, self.prompt_tokens,
            self.completion_tokens, self.verifier, self.advantage, self.judgment,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "prompt_id": self.prompt_id, "prompt": self.prompt, "completion": self.completion,
            "reference": self.reference, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, **self.verifier.to_json(), "advantage": self.advantage,
            "correct": self.judgment.correct, "parsed": self.judgment.parsed, "reason": self.judgment.reason,
        }


@dataclass(frozen=True)
class EvaluationRecord:
    """One held-out sample: judged independently and scored by the run's training verifier."""

    prompt_id: str
    sample: int
    """Index of the sample among its prompt's n."""
    prompt: str
    completion: str
    reference: str
    completion_tokens: int | None
    judgment: Judgment
    verifier: VerifierRecord
    thinking_tokens: int | None
    thinking_words: int | None
    transfer: Judgment | None = None
    """The transferred judge's verdict (`evaluation.transfer_extract`; None when it is off)."""

    def to_json(self) -> dict[str, Any]:
        transfer = self.transfer or Judgment(None, None, "")
        return {
            "prompt_id": self.prompt_id, "sample": self.sample, "prompt": self.prompt, "completion": self.completion,
            "reference": self.reference, "completion_tokens": self.completion_tokens,
            "correct": self.judgment.correct, "parsed": self.judgment.parsed, "reason": self.judgment.reason,
            "transfer_correct": transfer.correct, "transfer_parsed": transfer.parsed,
            **self.verifier.to_json(), "thinking_tokens": self.thinking_tokens, "thinking_words": self.thinking_words,
        }


def verifier_records(
    texts: list[str], method: str, ensemble: EnsembleRewards, optimised: Optimised,
    components: dict[str, list[float]], final: list[float], open_tag: str, close_tag: str,
) -> list[VerifierRecord]:
    """One record per completion: every member's verdicts, the aggregate and disagreement, what the
    method handed back, the objective's components and the final reward."""
    aggregate, optimised_reward = _column(ensemble.aggregate), _column(optimised.reward)
    columns = {name: _column(values) for name, values in optimised.columns.items()}
    spread = ensemble.spread
    measures = {name: _column(values) for name, values in (
        ("U", spread.u), ("normalised_disagreement", spread.normalised), ("vote_entropy", spread.vote_entropy),
        ("confidence_dispersion", spread.confidence_dispersion), ("mean_confidence", spread.mean_confidence),
    )}
    clean, seen = list(zip(*ensemble.clean, strict=True)), list(zip(*ensemble.seen, strict=True))  # [N][M]
    records = []
    for i, text in enumerate(texts):
        strict = parse_strict(text, open_tag, close_tag)
        records.append(VerifierRecord(
            strict=strict is not None,
            strict_answer=strict.answer if strict is not None else None,
            method=method,
            member_names=ensemble.names,
            clean=clean[i],
            seen=seen[i],
            reward=aggregate[i],
            disagreement={name: values[i] for name, values in measures.items()},
            method_columns={name: values[i] for name, values in columns.items()},
            optimised_reward=optimised_reward[i],
            components={name: values[i] for name, values in components.items()},
            final_reward=final[i],
            missing=optimised_reward[i] is None,
            suppressed=_suppressed(aggregate[i], optimised_reward[i]),
            down_weighted=_down_weighted(aggregate[i], optimised_reward[i]),
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


_MEANS = {
    "mean_aggregate": lambda r: r.reward,
    "mean_optimised": lambda r: r.optimised_reward,
    "mean_disagreement": lambda r: r.disagreement["U"],
    "mean_normalised_disagreement": lambda r: r.disagreement["normalised_disagreement"],
    "mean_vote_entropy": lambda r: r.disagreement["vote_entropy"],
    "mean_confidence_dispersion": lambda r: r.disagreement["confidence_dispersion"],
    "mean_confidence": lambda r: r.disagreement["mean_confidence"],
    "mean_final_reward": lambda r: r.final_reward,
}


def batch_counts(records: list[VerifierRecord], ensemble: EnsembleRewards) -> dict[str, float]:
    """Per-batch counts and means (`mean_<column>` for each column the method handed back, e.g.
    `mean_shaped`); a mean over no available value is left out."""
    counts: dict[str, float] = {"completions": float(len(records))}
    for flag in ("missing", "suppressed", "down_weighted", "strict"):
        counts[flag] = float(sum(getattr(record, flag) for record in records))
    columns = {f"mean_{name}": (lambda r, name=name: r.method_columns[name])
               for name in (records[0].method_columns if records else {})}
    for name, read in {**_MEANS, **columns}.items():
        value = mean([read(record) for record in records])
        if value is not None:
            counts[name] = value
    for name, clean, seen in zip(ensemble.names, ensemble.clean, ensemble.seen, strict=True):
        counts[f"member.{name}.corrupted"] = float(sum(s.reward != c.reward for c, s in zip(clean, seen, strict=True)))
        counts[f"member.{name}.missing"] = float(sum(s.reward is None for s in seen))
    return counts
