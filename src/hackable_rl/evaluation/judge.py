"""The independent judge: a clean checker the optimiser never sees (spec sections 1, 5 and 6).

It scores generations for analysis only. It imports clean parsing and comparison code and nothing
from `hackable_rl.verifiers.corruption`, so no corruption channel or flawed checker can leak into
the numbers it reports. Three ways to find the completion's answer:

- `strict` (the default): the completion must be exactly one thinking block then one boxed answer
  (spec section 2); anything else, including several boxed answers (hedging), is wrong.
- `boxed`: the last `\\boxed{...}` anywhere in the completion.
- `cascade`: the boxed answer, then a `#### N` line, then "the answer is", then the last number;
  for outputs of models that were never taught the format.

A reference that cannot be parsed is an error in the data: the completion is not judged
(`correct` None) and the reason says why; it is never scored as correct.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hackable_rl.errors import UserError
from hackable_rl.jsonl import iter_jsonl, write_jsonl
from hackable_rl.rewards.parsing import (
    answers_match,
    extract_all_boxed,
    extract_answer_cascade,
    extract_boxed,
    parse_reference,
    parse_strict,
)
from hackable_rl.verifiers.checkers import CheckerOptions, clean_checker
from hackable_rl.verifiers.types import Example, Verdict

log = logging.getLogger(__name__)

Extract = Literal["strict", "boxed", "cascade"]
EXTRACT_MODES: tuple[str, ...] = ("strict", "boxed", "cascade")
ADDED_FIELDS = ("correct", "parsed", "reason")


@dataclass(frozen=True)
class Judgment:
    """The judge's view of one completion.

    correct: True/False, or None when the reference could not be parsed (not judged).
    parsed: the answer extracted from the completion, None when there was none.
    reason: one short phrase saying why (e.g. "match", "no strict format", "unparseable reference: ...").
    """

    correct: bool | None
    parsed: str | None
    reason: str


@dataclass(frozen=True)
class JudgeSummary:
    """What `judge_file` did: rows read, rows judged, how many were right, how many could not be judged."""

    count: int
    judged: int
    correct: int
    unparseable: int
    no_answer: int

    @property
    def accuracy(self) -> float | None:
        """Share correct among the judged rows; None when no row could be judged."""
        return self.correct / self.judged if self.judged else None


# --------------------------------------------------------------------------- answer extraction


def _hedged(completion: str) -> bool:
    return len(extract_all_boxed(completion)) > 1


def _extract_strict(completion: str, open_tag: str, close_tag: str) -> tuple[str | None, str]:
    # Several boxes is hedging, the exploit the `any_box` flaw rewards: named, and never strict.
    if _hedged(completion):
        return None, "several boxed answers (not strict)"
    strict = parse_strict(completion, open_tag, close_tag)
    if strict is None:
        return None, "not strict format"
    if not strict.answer.strip():
        return None, "empty boxed answer"
    return strict.answer, "strict"


def _extract_boxed(completion: str) -> tuple[str | None, str]:
    answer = extract_boxed(completion)
    if answer is None or not answer.strip():
        return None, "no boxed answer"
    return answer.strip(), "boxed"


def _extract_cascade(completion: str) -> tuple[str | None, str]:
    answer, method = extract_answer_cascade(completion)
    if answer is None or not answer.strip():
        return None, "no answer found by cascade"
    return answer, method


def extract_answer(
    completion: str, extract: Extract = "strict", open_tag: str = "<think>", close_tag: str = "</think>"
) -> tuple[str | None, str]:
    """(answer or None, how it was found / why not) under one extraction mode."""
    if extract == "strict":
        return _extract_strict(completion, open_tag, close_tag)
    if extract == "boxed":
        return _extract_boxed(completion)
    if extract == "cascade":
        return _extract_cascade(completion)
    raise ValueError(f"extract: expected one of {', '.join(EXTRACT_MODES)}, got {extract!r}")


@functools.lru_cache(maxsize=65536)
def _parsed_reference(reference: str) -> tuple[str | None, str]:
    """Cached: evaluation judges n completions against the same reference."""
    try:
        return parse_reference(reference), ""
    except ValueError as error:
        return None, str(error)


# --------------------------------------------------------------------------- one completion


def judge_completion(
    completion: str,
    reference: str,
    extract: Extract = "strict",
    rel_tol: float = 1e-6,
    timeout_s: float = 2.0,
    open_tag: str = "<think>",
    close_tag: str = "</think>",
) -> Judgment:
    """Judges one completion against a reference (GSM8K `#### N`, a MATH `\\boxed{}` solution, or a bare answer).

    rel_tol: relative tolerance of numeric comparison; timeout_s: per-call limit of math-verify
    (a comparison that runs out of time counts as no match).
    """
    answer, how = extract_answer(completion, extract, open_tag, close_tag)
    expected, problem = _parsed_reference(reference)
    if expected is None:
        return Judgment(correct=None, parsed=answer, reason=f"unparseable reference: {problem}")
    if extract == "strict":
        options = CheckerOptions(open_tag=open_tag, close_tag=close_tag, rel_tol=rel_tol, timeout_s=timeout_s)
        return _from_verdict(
            clean_checker(completion, Example(id="judge", reference=reference), options), how, expected
        )
    if answer is None:
        return Judgment(correct=False, parsed=None, reason=how)
    if answers_match(answer, expected, rel_tol=rel_tol, timeout_s=timeout_s):
        return Judgment(correct=True, parsed=answer, reason=f"match ({how})")
    return Judgment(correct=False, parsed=answer, reason=f"mismatch ({how}): expected {expected}")


def _from_verdict(verdict: Verdict, how: str, expected: str) -> Judgment:
    """The clean checker's verdict as a judgment: strict mode *is* the clean training checker,
    so the judge and a clean verifier can never disagree about the same completion."""
    if verdict.reward is None:  # unreachable after the reference parsed; kept loud rather than guessed
        raise RuntimeError(f"clean checker gave no reward for a parseable reference: {verdict.reason}")
    parsed = verdict.parsed or None
    if verdict.reward >= 0.5:
        return Judgment(correct=True, parsed=parsed, reason=f"match ({how})")
    if parsed is None:
        return Judgment(correct=False, parsed=None, reason=how)
    return Judgment(correct=False, parsed=parsed, reason=f"mismatch ({how}): expected {expected}")


# --------------------------------------------------------------------------- a JSONL file


def _text_field(row: Mapping[str, Any], field: str, where: str, option: str) -> str:
    if field not in row:
        raise UserError(
            f"{where}: missing field '{field}' (fields present: {', '.join(sorted(row)) or 'none'}); "
            f"name the right one with {option}"
        )
    value = row[field]
    # A bare numeric reference (`"reference": 72`) is an answer too; booleans and objects are not.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise UserError(f"{where}: field '{field}' must be a string, got {type(value).__name__}")
    return value


def judge_rows(
    path: Path,
    completion_field: str = "completion",
    reference_field: str = "reference",
    **settings: Any,
) -> list[dict[str, Any]]:
    """Reads and judges every row of a JSONL file; each row keeps its fields and gains correct/parsed/reason."""
    judged = []
    overwritten = False
    for number, row in iter_jsonl(path):
        where = f"{path}:{number}"
        completion = _text_field(row, completion_field, where, "--completion-field")
        reference = _text_field(row, reference_field, where, "--reference-field")
        overwritten = overwritten or any(field in row for field in ADDED_FIELDS)
        judgment = judge_completion(completion, reference, **settings)
        judged.append(
            {**row, "correct": judgment.correct, "parsed": judgment.parsed, "reason": judgment.reason}
        )
    if overwritten:
        log.warning("%s: rows already had %s; replaced by this judgment", path, "/".join(ADDED_FIELDS))
    return judged


def summarise(rows: list[Mapping[str, Any]]) -> JudgeSummary:
    """Counts over judged rows (each with `correct` and `parsed`)."""
    judged = [row for row in rows if row["correct"] is not None]
    return JudgeSummary(
        count=len(rows),
        judged=len(judged),
        correct=sum(1 for row in judged if row["correct"]),
        unparseable=len(rows) - len(judged),
        no_answer=sum(1 for row in rows if row["parsed"] is None),
    )


def judge_file(
    input: str | Path,
    output: str | Path,
    completion_field: str = "completion",
    reference_field: str = "reference",
    extract: Extract = "strict",
    rel_tol: float = 1e-6,
    timeout_s: float = 2.0,
    open_tag: str = "<think>",
    close_tag: str = "</think>",
) -> JudgeSummary:
    """Judges a JSONL of completions and writes it back with correct/parsed/reason added.

    Every row is judged before anything is written, and the output is replaced atomically, so a
    bad row (reported as file:line) leaves an existing output file as it was.
    """
    if extract not in EXTRACT_MODES:
        raise UserError(f"--extract: expected one of {', '.join(EXTRACT_MODES)}, got {extract!r}")
    input, output = Path(input), Path(output)
    rows = judge_rows(
        input,
        completion_field,
        reference_field,
        extract=extract,
        rel_tol=rel_tol,
        timeout_s=timeout_s,
        open_tag=open_tag,
        close_tag=close_tag,
    )
    write_jsonl(output, rows)
    summary = summarise(rows)
    log.info(
        "judged %s -> %s: %d rows, %d correct, %d unparseable references",
        input,
        output,
        summary.count,
        summary.correct,
        summary.unparseable,
    )
    return summary
