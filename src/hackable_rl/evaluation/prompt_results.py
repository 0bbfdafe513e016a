"""Per-prompt results: what every evaluation saves per prompt (`prompts.jsonl`, one `PromptResult`
each: how many of its n samples the judge found correct, whether the greedy completion was correct,
its mean observed reward and hacking gap), the unit the paired comparisons (`evaluation.paired`)
resample and pair.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.evaluation.metrics import reward_metrics

PROMPTS_FILE = "prompts.jsonl"


# The metrics a comparison can be made on, and the per-prompt value each one averages.
METRICS = ("pass_at_1", "greedy_accuracy", "hacking_gap", "pass_at_1_transfer")


@dataclass(frozen=True)
class PromptResult:
    """One prompt's evaluation: the unit a paired bootstrap resamples."""

    prompt_id: str
    n: int
    """Samples the judge could score (unjudged samples are left out, as in pass@1)."""
    correct: int
    """Of those, judged correct."""
    greedy_correct: bool | None
    """The greedy completion judged correct (None: no greedy pass, or the judge could not score it)."""
    observed_reward: float | None
    """Mean normalised training-verifier reward over its samples (None: none was rewarded)."""
    hacking_gap: float | None
    """Mean of (normalised reward - judged correct) over samples with both (None: none has both)."""
    transfer_n: int | None = None
    """Samples the transferred judge could score (None: no transferred judge)."""
    transfer_correct: int | None = None
    """Of those, judged correct by the transferred judge."""

    def value(self, metric: str) -> float | None:
        """This prompt's contribution to `metric` (None: undefined here, so the prompt is left out)."""
        if metric == "pass_at_1":
            return self.correct / self.n if self.n else None
        if metric == "pass_at_1_transfer":
            return self.transfer_correct / self.transfer_n if self.transfer_n else None
        if metric == "greedy_accuracy":
            return None if self.greedy_correct is None else float(self.greedy_correct)
        if metric == "hacking_gap":
            return self.hacking_gap
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")


def prompt_results(
    records: Sequence[Mapping[str, Any]],
    greedy_records: Sequence[Mapping[str, Any]] = (),
    reward_range: tuple[float, float] = (0.0, 1.0),
) -> list[PromptResult]:
    """Per-prompt results of sampled records (and, optionally, one greedy record per prompt), in
    first-seen prompt order. Records are evaluation records: `prompt_id`, `correct`, `reward`."""
    by_prompt: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_prompt[str(record["prompt_id"])].append(record)
    greedy = {str(r["prompt_id"]): r.get("correct") for r in greedy_records}
    results = []
    for prompt_id, samples in by_prompt.items():
        judged = [bool(s["correct"]) for s in samples if s.get("correct") is not None]
        transferred = [bool(s["transfer_correct"]) for s in samples if s.get("transfer_correct") is not None]
        rewards = reward_metrics(samples, reward_range)  # the evaluation's own definitions, per prompt
        results.append(
            PromptResult(prompt_id, len(judged), sum(judged), greedy.get(prompt_id),
                         rewards["observed_reward"], rewards["hacking_gap"],
                         len(transferred) if transferred else None, sum(transferred) if transferred else None)
        )
    return results


def write_prompt_results(path: Path, results: Sequence[PromptResult]) -> Path:
    write_jsonl(path, (asdict(result) for result in results))
    return path


def read_prompt_results(path: Path) -> list[PromptResult]:
    """A `prompts.jsonl` written by an evaluation; a missing file says which stage writes it."""
    if not path.is_file():
        raise UserError(f"{path}: no per-prompt results; run `hackable-rl eval` with --metrics-dir there first")
    results = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            results.append(PromptResult(**row))
        except TypeError as error:
            raise UserError(f"{path}:{number}: not a per-prompt result ({error})") from None
    return results
