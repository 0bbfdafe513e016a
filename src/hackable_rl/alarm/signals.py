"""Judge-free signals of one training step, from its generation records (plain Python: no torch).

A user training against a verifier they cannot fully trust has no judge. What they do have, every
step, is what the policy writes and what the verifier ensemble says of it. `step_signals` turns one
step's records (their JSON form, what generations/step-XXXXX.jsonl holds) into named signals and
never reads `correct`. A prompt's *group* is its completions in the step (GRPO's group).

- `reward`: the mean observed (aggregate) training reward;
- `zero_advantage_share`: the share of groups whose completions all got the same advantage (the
  group teaches nothing: every member paid alike, e.g. all paid once an exploit is universal);
- `modal_answer_share`: per group, the share of its completions giving the group's most common
  strict answer (no answer never counts), averaged over groups;
- `answer_entropy`: per group, the entropy (nats) of its answers, no answer counted as one answer,
  averaged over groups (concentration on one pattern lowers it);
- `pay_rate/<member>`: each ensemble member's mean (seen) reward;
- `pay_spread`: the highest member pay rate minus the lowest (None with one member): a flaw some
  members hold pays through them and not the others;
- `disagreement`: the mean member disagreement U;
- `mean_length`: the mean completion length in tokens;
- `unparsable_share`: the share of completions without a strict, non-empty answer;
- `entropy`: TRL's logged token entropy (`trl/entropy`), when it logs one;
- `truncation_survival`: the truncation probe's share (`alarm/truncation_probe.py`), when it runs.

signals.csv (`SIGNALS_FILE`) holds one row per step of these, in the run folder and beside a study
condition's curve.csv.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ALARM_SIGNALS
from hackable_rl.core.errors import UserError
from hackable_rl.core.stats import mean

__all__ = [
    "SIGNALS_FILE", "FIXED_SIGNALS", "StepSignals", "step_signals", "write_signals_csv", "read_signals_csv",
]

SIGNALS_FILE = "signals.csv"
"""One row per step: `step`, then each signal (blank where undefined)."""

FIXED_SIGNALS = ALARM_SIGNALS
"""Every signal a run has whatever its ensemble (the `pay_rate/<member>` columns come after them)."""

_EQUAL_ADVANTAGE = 1e-9  # advantages are floats from the same formula: equal up to rounding


@dataclass(frozen=True)
class StepSignals:
    """One step's judge-free signals by name (None: undefined at that step)."""

    step: int
    values: dict[str, float | None] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        return self.values.get(name)

    def with_values(self, **values: float | None) -> StepSignals:
        return StepSignals(self.step, {**self.values, **values})

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, **self.values}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> StepSignals:
        """From an alarm.jsonl or signals.csv row (an `alarm` column is the alarm's, not a signal)."""
        return cls(int(row["step"]), {key: value for key, value in row.items() if key not in ("step", "alarm")})


def _groups(records: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    by_prompt: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_prompt[record["prompt_id"]].append(record)
    return list(by_prompt.values())


def _answer(record: Mapping[str, Any]) -> str | None:
    """The record's strict answer; an empty box is no answer."""
    return record.get("strict_answer") or None


def zero_advantage_share(groups: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
    """The share of groups whose advantages are all equal (a one-completion group is not counted)."""
    sized = [[record["advantage"] for record in group] for group in groups if len(group) > 1]
    flat = [max(values) - min(values) <= _EQUAL_ADVANTAGE for values in sized if None not in values]
    return mean(float(equal) for equal in flat)


def modal_answer_share(groups: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
    """Per group, the share of completions giving its most common answer (no answer never counts)."""
    shares = []
    for group in groups:
        tally = Counter(answer for record in group if (answer := _answer(record)) is not None)
        shares.append(max(tally.values(), default=0) / len(group))
    return mean(shares)


def answer_entropy(groups: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
    """Per group, the entropy (nats) of its answers with no answer as one more answer; the mean."""
    entropies = []
    for group in groups:
        tally = Counter(_answer(record) for record in group)
        entropies.append(-sum(count / len(group) * math.log(count / len(group)) for count in tally.values()))
    return mean(entropies)


def member_pay_rates(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """`pay_rate/<member>` -> the member's mean seen reward (the `member.<name>.reward` keys)."""
    names = sorted({key[len("member."):-len(".reward")] for record in records for key in record
                    if key.startswith("member.") and key.endswith(".reward") and not key.endswith(".clean_reward")})
    return {f"pay_rate/{name}": mean(record.get(f"member.{name}.reward") for record in records) for name in names}


def pay_spread(rates: Mapping[str, float | None]) -> float | None:
    defined = [rate for rate in rates.values() if rate is not None]
    return max(defined) - min(defined) if len(defined) > 1 else None


def step_signals(
    step: int,
    records: Sequence[Mapping[str, Any]],
    entropy: float | None = None,
    truncation_survival: float | None = None,
) -> StepSignals:
    """The signals of one step's records (`GenerationRecord.to_json()` rows), so training and the
    post-hoc analysis read the same fields; `entropy` and `truncation_survival` come from elsewhere."""
    groups = _groups(records)
    rates = member_pay_rates(records)
    values: dict[str, float | None] = {
        "reward": mean(record.get("reward") for record in records),
        "zero_advantage_share": zero_advantage_share(groups),
        "modal_answer_share": modal_answer_share(groups),
        "answer_entropy": answer_entropy(groups),
        "pay_spread": pay_spread(rates),
        "disagreement": mean(record.get("U") for record in records),
        "mean_length": mean(record.get("completion_tokens") for record in records),
        "unparsable_share": mean(float(_answer(record) is None) for record in records),
        "entropy": entropy,
        "truncation_survival": truncation_survival,
    }
    return StepSignals(step, values | rates)


# --------------------------------------------------------------------------- signals.csv


def _columns(history: Sequence[StepSignals]) -> list[str]:
    extra = sorted({name for signals in history for name in signals.values if name not in FIXED_SIGNALS})
    return ["step", *FIXED_SIGNALS, *extra]


def write_signals_csv(history: Iterable[StepSignals], path: Path) -> Path:
    """signals.csv: one row per step in step order, undefined cells blank."""
    rows = sorted(history, key=lambda signals: signals.step)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        columns = _columns(rows)
        writer.writerow(columns)
        for signals in rows:
            writer.writerow([signals.step, *("" if (v := signals.get(c)) is None else repr(float(v)) for c in columns[1:])])
    return path


def _number(path: Path, line: int, column: str, text: str) -> float | None:
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{path}:{line}: column {column!r}: expected a number or blank, got {text!r}") from None


def read_signals_csv(path: Path) -> list[StepSignals]:
    """The rows of a signals.csv; a malformed one is a UserError naming the file, line and column."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read signals ({error})") from None
    if not rows or rows[0][:1] != ["step"]:
        raise UserError(f"{path}:1: expected a header starting with `step`")
    header, history = rows[0], []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise UserError(f"{path}:{line}: {len(row)} cells, the header has {len(header)}")
        step = _number(path, line, "step", row[0])
        if step is None or step != int(step):
            raise UserError(f"{path}:{line}: column 'step': expected a whole number, got {row[0]!r}")
        history.append(StepSignals(int(step), {c: _number(path, line, c, v) for c, v in zip(header[1:], row[1:], strict=True)}))
    return history
