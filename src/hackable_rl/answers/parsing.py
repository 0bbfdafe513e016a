"""Answer parsing: boxed answers, the strict completion format, references, numbers, comparison.

Everything here is plain Python (no torch, no NumPy) and cached where a training step calls it
once per ensemble member: the same completion string is parsed once, not M times.

The comparison (`answers_match`) is numeric first: both sides normalised to floats and compared
with a relative tolerance. Only when one side is not a plain number does it fall back to
`math-verify`, in a worker process with a hard timeout (see `mathverify.py`), because math-verify
can hang on adversarial expressions and a hung verifier silently zeroes a whole run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hackable_rl.answers.numbers import normalize_number

__all__ = [
    "StrictCompletion",
    "extract_all_boxed",
    "extract_boxed",
    "parse_strict",
    "parse_reference",
    "answers_match",
    "extract_last_number",
    "extract_answer_cascade",
    "completion_text",
]

_BOX_OPEN = "\\boxed{"
_CACHE_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class StrictCompletion:
    """A completion in the strict format: one thinking block, then one boxed answer."""

    thinking: str
    """Text between the thinking tags (unstripped)."""
    answer: str
    """Content of the single box, stripped (may be empty: strict but unanswered)."""


# --------------------------------------------------------------------------- boxes


_BRACE = re.compile(r"[{}]")
_BOX_OPEN_RE = re.compile(re.escape(_BOX_OPEN))


def _box_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every balanced `\\boxed{...}`, outermost only, in order.

    Linear in `len(text)` for any input: one pass pairs every brace with a stack, so a run of
    unclosed boxes (a policy looping on `\\boxed{`) costs one scan, not one scan per box. An
    unbalanced box is ignored and a later (or nested) well-formed one still counts.
    """
    first = text.find(_BOX_OPEN)
    if first == -1:
        return []
    if text.find(_BOX_OPEN, first + len(_BOX_OPEN)) == -1:  # the common case: one box, one scan
        content_start = first + len(_BOX_OPEN)
        end = _closing_brace(text, content_start)
        return [] if end == -1 else [(first, end + 1, text[content_start:end])]
    openers = [match.end() - 1 for match in _BOX_OPEN_RE.finditer(text, first)]  # each box's `{`
    closing = _closing_braces(text, openers)
    spans = []
    resume = 0  # boxes inside a balanced box are its content, not boxes of their own
    for brace in openers:
        start = brace - len(_BOX_OPEN) + 1
        end = closing.get(brace, -1)
        if start < resume or end == -1:
            continue
        spans.append((start, end + 1, text[brace + 1 : end]))
        resume = end + 1
    return spans


def _closing_brace(text: str, start: int) -> int:
    """Index of the `}` that closes a brace opened just before `start`, or -1."""
    depth = 1
    for match in _BRACE.finditer(text, start):
        depth += 1 if match.group() == "{" else -1
        if not depth:
            return match.start()
    return -1


def _closing_braces(text: str, openers: list[int]) -> dict[int, int]:
    """For each `{` index in `openers` (ascending), the index of the `}` that closes it; unclosed ones
    are absent. The `}` that closes a `{` depends only on the text after it, so one stack pass from
    the first opener pairs them all: the same answer as rescanning from each, in linear time."""
    wanted = set(openers)
    closing: dict[int, int] = {}
    stack: list[int] = []
    for match in _BRACE.finditer(text, openers[0]):
        if match.group() == "{":
            stack.append(match.start())
        elif stack:
            opened = stack.pop()
            if opened in wanted:
                closing[opened] = match.start()
    return closing


@lru_cache(maxsize=_CACHE_SIZE)
def _boxes(text: str) -> tuple[str, ...]:
    return tuple(content for _, _, content in _box_spans(text))


def extract_all_boxed(text: str) -> list[str]:
    """Contents of every balanced `\\boxed{...}` in order (nested braces kept; unbalanced ignored)."""
    return list(_boxes(text))


def extract_boxed(text: str) -> str | None:
    """Content of the last balanced box (the convention for MATH solutions), or None."""
    boxes = _boxes(text)
    return boxes[-1] if boxes else None


@lru_cache(maxsize=_CACHE_SIZE)
def parse_strict(
    completion: str, open_tag: str = "<think>", close_tag: str = "</think>"
) -> StrictCompletion | None:
    """The strict parse of section 2 of the spec, or None when the completion is not strict.

    Strict: optional whitespace, `open_tag`, thinking, `close_tag`, whitespace, exactly one
    `\\boxed{...}`, optional whitespace, nothing else. A second thinking block, a second box anywhere
    (including inside the thinking: a hedge is a hedge), or an unbalanced box is not strict.
    """
    simple = _simple_strict(open_tag, close_tag).fullmatch(completion)
    if simple is not None:
        # Fast path: the common shape with a flat box; the same rules as below, checked by the regex
        # (no nested braces in the box) and here (no second thinking block, no box in the thinking).
        thinking, answer = simple.groups()
        if open_tag in thinking or close_tag in thinking or _BOX_OPEN in thinking:
            return None
        return StrictCompletion(thinking=thinking, answer=answer.strip())
    text = completion.strip()
    if not text.startswith(open_tag):
        return None
    close_at = text.find(close_tag, len(open_tag))
    if close_at == -1:
        return None
    thinking = text[len(open_tag) : close_at]
    if open_tag in thinking or _BOX_OPEN in thinking:
        return None
    rest = text[close_at + len(close_tag) :].lstrip()
    if not rest.startswith(_BOX_OPEN) or rest.count(_BOX_OPEN) != 1:
        return None
    spans = _box_spans(rest)
    if len(spans) != 1 or spans[0][1] != len(rest):
        return None
    return StrictCompletion(thinking=thinking, answer=spans[0][2].strip())


@lru_cache(maxsize=64)
def _simple_strict(open_tag: str, close_tag: str) -> re.Pattern[str]:
    return re.compile(
        rf"\s*{re.escape(open_tag)}(.*?){re.escape(close_tag)}\s*\\boxed\{{([^{{}}]*)\}}\s*", re.DOTALL
    )


# --------------------------------------------------------------------------- references


@lru_cache(maxsize=_CACHE_SIZE)
def parse_reference(text: str) -> str:
    """The canonical answer of a reference: GSM8K `... #### 72` -> `72`; a MATH solution -> its
    last boxed content; otherwise the bare answer, stripped. Raises ValueError saying why when
    nothing parseable is there (an unparseable reference is a data error, never scored correct)."""
    if "####" in text:
        answer = text.rsplit("####", 1)[1].strip()
        if not answer:
            raise ValueError(f"reference {_preview(text)}: nothing after '####'")
        return answer
    if _BOX_OPEN in text:
        answer = extract_boxed(text)
        if answer is None:
            raise ValueError(f"reference {_preview(text)}: \\boxed{{ has unbalanced braces")
        if not answer.strip():
            raise ValueError(f"reference {_preview(text)}: the boxed answer is empty")
        return answer.strip()
    answer = text.strip()
    if not answer:
        raise ValueError("reference is empty")
    return answer


def _preview(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[: width - 3] + "...")


# --------------------------------------------------------------------------- comparison

_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=_CACHE_SIZE)
def answers_match(predicted: str, reference: str, rel_tol: float = 1e-6, timeout_s: float = 2.0) -> bool:
    """True when `predicted` denotes the same answer as `reference` (already parsed).

    Numbers compare as floats with `rel_tol` (and an absolute 1e-12 so that 0 matches 0.0).
    Anything else goes to math-verify in a worker process bounded by `timeout_s`; a timeout
    counts as no match and is logged (never a hang).
    """
    if not predicted.strip():
        return False
    predicted_number = normalize_number(predicted)
    reference_number = normalize_number(reference)
    if predicted_number is not None and reference_number is not None:
        return math.isclose(predicted_number, reference_number, rel_tol=rel_tol, abs_tol=1e-12)
    if _SPACES.sub("", predicted) == _SPACES.sub("", reference):
        return True
    from hackable_rl.answers.mathverify import math_verify_equal  # lazy: starts a worker on first use

    return math_verify_equal(predicted, reference, timeout_s=timeout_s)


# --------------------------------------------------------------------------- lenient extraction (judge cascade)

_LAST_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|[-+]?\.\d+")
_HASH_ANSWER = re.compile(r"####\s*([^\n]+)")
# `(?:\s*:)?\s*` matches what `\s*:?\s*` does and tries the same start positions in the same order,
# but a trailing run of newlines after "answer is" costs one pass instead of every split of it.
_ANSWER_IS = re.compile(r"(?:final\s+)?answer\s+is(?:\s*:)?\s*(.+?)(?:\.(?:\s|$)|\n|$)", re.IGNORECASE)


def extract_last_number(text: str) -> str | None:
    """The last number written in `text` (commas, decimals and `a/b` kept as written), or None."""
    numbers = _LAST_NUMBER.findall(text)
    return numbers[-1] if numbers else None


def extract_answer_cascade(text: str) -> tuple[str | None, str]:
    """(answer, method) from the first rule that finds one: `boxed` (last box), `hash` (`#### N`),
    `answer_is` ("the answer is X"), `last_number`; (None, "none") when nothing is found."""
    boxed = extract_boxed(text)
    if boxed is not None and boxed.strip():
        return boxed.strip(), "boxed"
    hashed = _HASH_ANSWER.findall(text)
    if hashed and hashed[-1].strip():
        return hashed[-1].strip(), "hash"
    stated = _ANSWER_IS.findall(text)
    if stated and stated[-1].strip(" $"):
        return stated[-1].strip(" $"), "answer_is"
    number = extract_last_number(text)
    if number is not None:
        return number, "last_number"
    return None, "none"


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or message lists for conversational data."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"completion must be a string or a list of messages, got {type(completion).__name__}")
