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

__all__ = [
    "StrictCompletion",
    "extract_all_boxed",
    "extract_boxed",
    "parse_strict",
    "parse_reference",
    "normalize_number",
    "answers_match",
    "extract_last_number",
    "extract_answer_cascade",
    "read_decimal_commas",
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


# --------------------------------------------------------------------------- numbers

_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_DIGITS_AND_COMMAS = re.compile(r"[\d,]+")
_FRAC = re.compile(r"^([-+]?)\\[dt]?frac\{\s*(" + _NUMBER + r")\s*\}\{\s*(" + _NUMBER + r")\s*\}$")
_FRAC_SHORT = re.compile(r"^([-+]?)\\[dt]?frac(\d)(\d)$")
_SLASH = re.compile(r"^(" + _NUMBER + r")\s*/\s*(" + _NUMBER + r")$")
# `\s*(?:\{\s*)?` rather than `\s*\{?\s*`: the same strings, without trying every split of a long
# run of spaces between two `\s*` (quadratic backtracking on adversarial input).
_TIMES_TEN = re.compile(
    r"^(" + _NUMBER + r")\s*(?:\\times|\\cdot|x|\*)\s*10\s*\^\s*(?:\{\s*)?([-+]?\d+)\s*\}?$"
)
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_UNIT_TAIL = re.compile(r"^(.*?\d\.?)\s*([a-zA-Z]+(?:\s+[a-zA-Z]+)*)\.?$")
_VARIABLE_PREFIX = re.compile(r"^[a-zA-Z]\s*=\s*")
# Words that are mathematics, not units: "3 pi" is not 3.
_NOT_UNITS = frozenset({"pi", "sqrt", "i", "e", "inf", "infty", "infinity", "or", "and", "to", "x", "y", "n"})
_STRIP_TOKENS = ("\\$", "$", "\\%", "%", "\\!", "\\,", "\\;", "\\ ", "^\\circ", "^{\\circ}", "\\circ", "°")


@lru_cache(maxsize=_CACHE_SIZE)
def normalize_number(text: str) -> float | None:
    """The number an answer string denotes, or None when it is not a plain number.

    Handles thousands separators, `$`, `%`, degree signs, unit words (`12 apples`, `\\text{ cm}`),
    `x = 5`, trailing `.0`, signs (including the Unicode minus), `\\frac`/`\\dfrac`/`\\tfrac`,
    `a/b`, decimals and scientific notation (`1.5e3`, `1.5 \\times 10^{3}`).
    """
    if _PLAIN_NUMBER.fullmatch(text):
        return float(text)  # the hot path: most answers are bare integers
    cleaned = _clean_number_text(text)
    if not cleaned:
        return None
    return _number_value(cleaned)


def _clean_number_text(text: str) -> str:
    cleaned = text.strip().replace("\u2212", "-").replace("\u2013", "-")
    cleaned = _TEXT_WRAPPER.sub(r" \1", cleaned)
    for token in _STRIP_TOKENS:
        cleaned = cleaned.replace(token, "")
    cleaned = _VARIABLE_PREFIX.sub("", cleaned.strip())
    if "," in cleaned:
        cleaned = _DIGITS_AND_COMMAS.sub(_drop_thousands_separators, cleaned)
    unit = _UNIT_TAIL.match(cleaned)
    if unit and not set(unit.group(2).lower().split()) & _NOT_UNITS:
        cleaned = unit.group(1)
    cleaned = cleaned.strip().rstrip(".").strip()
    if cleaned.startswith("{") and cleaned.endswith("}"):
        cleaned = cleaned[1:-1].strip()
    return cleaned


def _drop_thousands_separators(run: re.Match[str]) -> str:
    """One maximal run of digits and commas with its thousands grouping (`1,234,567`) unseparated.

    The rule is the regex `(?<![\\d.])\\d{1,3}(?:,\\d{3})+(?![\\d,])` applied to the text, computed
    per run in linear time (the regex retries the rest of the run from every comma: quadratic on
    `1,234,...,2345`). A match must end where the run ends, so it is the leftmost piece i (split at
    commas) with 1-3 digits, followed only by 3-digit pieces (at least one), and not preceded by a
    digit or a `.` (only the first piece can be: the others follow a comma).
    """
    text = run.group()
    pieces = text.split(",")
    last = len(pieces) - 1
    first_full = last + 1  # first piece of the trailing run of 3-digit pieces
    while first_full > 0 and len(pieces[first_full - 1]) == 3:
        first_full -= 1
    after_dot = run.start() > 0 and run.string[run.start() - 1] == "."
    for index in (first_full - 1, first_full, first_full + 1):
        if index < 0 or index >= last or not 1 <= len(pieces[index]) <= 3 or (index == 0 and after_dot):
            continue
        start = sum(len(piece) + 1 for piece in pieces[:index])
        return text[:start] + "".join(pieces[index:])
    return text


# A number with a decimal comma: `1,22`, `0,111`, `1000,99`, `1.234,5` (dots group thousands). Not
# part of a longer run such as the list `1,2,3` or `1,000.5` (a digit, `,` or `.` before it; a
# digit, `,` or `.digit` after it).
_DECIMAL_COMMA = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+|\d+),(\d+)(?![\d,]|\.\d)")


def read_decimal_commas(text: str) -> str:
    """`text` with every decimal-comma number rewritten with a decimal point: `1,22` -> `1.22`,
    `1.234,5` -> `1234.5`. For data written that way (the judge's `decimal_comma` option): a comma
    between two digit runs then never groups thousands (`1,222` is 1.222) and a pair `(1,2)` reads
    as `(1.2)`, so it is off by default. Linear time."""
    if "," not in text:
        return text
    return _DECIMAL_COMMA.sub(lambda match: f"{match.group(1).replace('.', '')}.{match.group(2)}", text)


def _number_value(text: str) -> float | None:
    if _NUMBER_RE.fullmatch(text):
        return _finite(float(text))
    frac = _FRAC.match(text) or _FRAC_SHORT.match(text)
    if frac:
        sign, numerator, denominator = frac.groups()
        return _ratio(float(numerator), float(denominator), negative=sign == "-")
    slash = _SLASH.match(text)
    if slash:
        return _ratio(float(slash.group(1)), float(slash.group(2)), negative=False)
    times_ten = _TIMES_TEN.match(text)
    if times_ten:
        return _finite(float(times_ten.group(1)) * 10.0 ** int(times_ten.group(2)))
    return None


def _ratio(numerator: float, denominator: float, negative: bool) -> float | None:
    if denominator == 0:
        return None
    value = numerator / denominator
    return _finite(-value if negative else value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


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
