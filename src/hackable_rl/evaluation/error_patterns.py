"""What a policy's wrong answers are: each judged-wrong sample classified by its error's pattern.

A verifier's blind spot matters when it covers an error the policy already makes, so a natural
flaw (`reward/early_stop.py`, `reward/off_by_one.py`) is chosen from this distribution,
measured on the base policy's samples of the validation split (`benchmarks/bench_error_patterns.py`,
docs/studies.md).

Each wrong sample gets the first pattern of `PATTERNS` that explains its boxed answer, from the
prompt's chain (`answers.chains`); `matches` counts every pattern an answer fits (they overlap:
on `3+1-1` stopping early and dropping an operation give the same value):

    unparsable          no strict completion, an empty box or a box that holds no number
    stopped_early       the chain's value one operation before the end
    stopped_earlier     the value two or more operations before the end (the starting number included)
    dropped_operation   one operation other than the last left out
    repeated_operation  one operation applied twice
    sign_flip           one `+` read as `-` or one `-` as `+`
    operands_swapped    one subtraction computed as b - a
    off_by_one          one more or one less than the answer
    slip                another answer, and some written step `a+b=c` is wrong arithmetic
    other               none of these (or the prompt has no chain in its metadata)

Plain Python: reading records and metadata, no torch.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hackable_rl.answers.chains import Chain, chain_of
from hackable_rl.answers.numbers import normalize_number
from hackable_rl.answers.parsing import parse_strict
from hackable_rl.core.jsonl import iter_jsonl

__all__ = ["PATTERNS", "ErrorCounts", "classify_answer", "classify_generations", "count_errors", "format_errors"]

PATTERNS = ("unparsable", "stopped_early", "stopped_earlier", "dropped_operation", "repeated_operation",
            "sign_flip", "operands_swapped", "off_by_one", "slip", "other")
"""Every class a wrong answer can get, in the order they are tried."""

_STRUCTURAL: tuple[tuple[str, Callable[[Chain], set[int]]], ...] = (
    ("stopped_early", lambda chain: {chain.stopped_early()}),
    ("stopped_earlier", lambda chain: {chain.value_of(chain.steps[:i]) for i in range(len(chain.steps) - 1)}),
    ("dropped_operation", Chain.one_dropped),
    ("repeated_operation", Chain.one_repeated),
    ("sign_flip", Chain.one_sign_flipped),
    ("operands_swapped", Chain.one_operands_swapped),
    ("off_by_one", lambda chain: {chain.answer - 1, chain.answer + 1}),
)
_WRITTEN_STEP = re.compile(r"(-?\d+)\s*([-+*])\s*(\d+)\s*=\s*(-?\d+)")


def _integer(answer: str) -> int | None:
    value = normalize_number(answer)
    return int(value) if value is not None and value.is_integer() else None


def _has_slip(thinking: str) -> bool:
    """Whether some written step `a op b = c` states a wrong result."""
    for left, operator, right, result in _WRITTEN_STEP.findall(thinking):
        a, b, c = int(left), int(right), int(result)
        if {"+": a + b, "-": a - b, "*": a * b}[operator] != c:
            return True
    return False


def classify_answer(completion: str, chain: Chain | None, tags: tuple[str, str] = ("<think>", "</think>")) -> list[str]:
    """Every pattern of a wrong completion's answer, in `PATTERNS` order (`other` alone when none
    fits); the first is its class. The caller has judged the completion wrong."""
    strict = parse_strict(completion, *tags)
    answer = _integer(strict.answer) if strict is not None and strict.answer else None
    if answer is None:
        return ["unparsable"]
    if chain is None:
        return ["other"]
    found = [name for name, values in _STRUCTURAL if answer != chain.answer and answer in values(chain)]
    if _has_slip(strict.thinking):
        found.append("slip")
    return found or ["other"]


@dataclass
class ErrorCounts:
    """How a policy's judged samples split: right, wrong by class, and every pattern each wrong one fits."""

    samples: int = 0
    judged: int = 0
    wrong: int = 0
    by_class: Counter = field(default_factory=Counter)
    """Wrong samples per class (the first pattern each fits): they sum to `wrong`."""
    matches: Counter = field(default_factory=Counter)
    """Wrong samples per pattern they fit (a sample may count under several)."""
    by_steps: dict[int, Counter] = field(default_factory=dict)
    """Per chain length (operations): judged, wrong and per-class counts."""

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "judged": self.judged, "wrong": self.wrong,
                "by_class": {name: self.by_class[name] for name in PATTERNS},
                "matches": {name: self.matches[name] for name in PATTERNS},
                "by_steps": {str(steps): dict(counts) for steps, counts in sorted(self.by_steps.items())}}


def count_errors(records: Iterable[Mapping[str, Any]], metadata: Mapping[str, Mapping[str, Any]],
                 tags: tuple[str, str] = ("<think>", "</think>")) -> ErrorCounts:
    """Classifies every judged-wrong record (`prompt_id`, `completion`, `correct`: an eval's
    generations.jsonl); `metadata`: prompt id -> its prepared row's metadata (the chain)."""
    counts = ErrorCounts()
    for record in records:
        counts.samples += 1
        if record.get("correct") is None:
            continue
        counts.judged += 1
        chain = chain_of(metadata.get(str(record["prompt_id"])))
        per_length = counts.by_steps.setdefault(len(chain.steps) if chain else 0, Counter())
        per_length["judged"] += 1
        if record["correct"]:
            continue
        counts.wrong += 1
        per_length["wrong"] += 1
        patterns = classify_answer(str(record["completion"]), chain, tags)
        counts.by_class[patterns[0]] += 1
        per_length[patterns[0]] += 1
        counts.matches.update(patterns)
    return counts


def classify_generations(generations: Path, rows: Iterable[Mapping[str, Any]],
                         tags: tuple[str, str] = ("<think>", "</think>")) -> ErrorCounts:
    """`count_errors` over an eval's generations.jsonl, the chains read from the prepared `rows` of
    the split it sampled (a missing or broken file is a UserError naming it and the line)."""
    metadata = {str(row["id"]): row.get("metadata") or {} for row in rows}
    return count_errors((record for _, record in iter_jsonl(generations)), metadata, tags)


def format_errors(counts: ErrorCounts) -> list[str]:
    """The distribution as text lines: each class's count and share of the wrong samples and of all
    judged ones, most frequent first, then the patterns' overlapping counts."""
    lines = [f"{counts.judged} judged samples, {counts.wrong} wrong ({_share(counts.wrong, counts.judged)} of judged)",
             f"{'class':<20}{'wrong':>7}{'of wrong':>10}{'of judged':>11}{'fits':>7}"]
    for name, count in sorted(counts.by_class.items(), key=lambda item: (-item[1], PATTERNS.index(item[0]))):
        lines.append(f"{name:<20}{count:>7}{_share(count, counts.wrong):>10}{_share(count, counts.judged):>11}"
                     f"{counts.matches[name]:>7}")
    lines.append("fits: wrong samples whose answer fits the pattern, whatever their class (patterns overlap)")
    return lines


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"
