"""The records that cross a boundary: what the training verifier says of a completion, a training
generation, an evaluation sample. Frozen dataclasses, one naming scheme, one JSON form each.

The names, shared by both kinds of sample (docs/methodology.md lists every key):

- `correct`, `parsed`, `reason`: the independent judge's verdict (never a gradient);
- `reward`: the training verifier's aggregate reward r (the *observed* reward), `optimised_reward`
  what the method optimised (the aggregate for baseline, the shaped reward for robust);
- `strict`, `strict_answer`: whether the completion is in the strict format, and its boxed answer;
- `member.<name>.<field>`: each ensemble member's clean and corrupted verdict.

`to_json()` gives the flat JSON object written to JSONL (generations, eval samples) and MLflow tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hackable_rl.evaluation.judge import Judgment
from hackable_rl.verifiers.types import MemberVerdict, Verdict

__all__ = ["VerifierRecord", "GenerationRecord", "EvaluationRecord"]

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
    robust_aggregate: float | None
    shaped: float | None
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
            reward=self.reward, **self.disagreement, robust_aggregate=self.robust_aggregate, shaped=self.shaped,
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
