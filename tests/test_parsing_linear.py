"""Answer parsing takes linear time on adversarial input, and the linear rewrites answer exactly as
the simple (quadratic) rules they replace.

A policy that loops on `\\boxed{` writes a megabyte of unclosed boxes; a verifier that rescans the
rest of the text for every box takes minutes on it and stalls training. The timing tests compare a
1 MB input with a 100 kB one of the same kind: linear code takes about 10x as long, quadratic code
100x. They assert a ratio, never an absolute time, so a loaded machine does not fail them, and the
bound sits near the geometric midpoint of the two (32x): linear code measured 20.5x once in CI (per
byte, a string that no longer fits the CPU's caches costs up to twice as much: 1.8x at 2 MB here),
and quadratic code cannot pass it.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hackable_rl.answers import mathverify, numbers, parsing
from hackable_rl.answers.numbers import normalize_number, read_decimal_commas
from hackable_rl.answers.parsing import (
    extract_all_boxed,
    extract_answer_cascade,
    extract_last_number,
    parse_reference,
    parse_strict,
)
from hackable_rl.evaluation import judge as judge_module
from hackable_rl.evaluation.judge import EXTRACT_MODES, judge_completion
from hackable_rl.reward import checkers
from hackable_rl.reward.functions import correctness_reward, format_tag_reward
from hackable_rl.reward.types import Example

BIG = 1_000_000
SMALL = BIG // 10
MAX_RATIO = 32.0  # linear: ~10 (up to ~20 on a loaded machine); quadratic: ~100

# Each unit repeated to the wanted length: the inputs that made (or could make) a scan quadratic.
ADVERSARIAL = {
    "unclosed boxes": "\\boxed{",
    "unclosed boxes after a think block": "</think> \\boxed{",
    "unclosed boxes with text": "\\boxed{a",
    "open braces": "{",
    "unclosed fractions": "\\frac{",
    "unclosed think tags": "<think>",
    "close think tags": "</think>",
    "digits": "1",
    "failing thousands grouping": ",234",  # `1,234,...,2345`: prefixed and suffixed below
    "newlines after 'answer is'": "\n",  # prefixed below
    "spaces in scientific notation": " ",  # prefixed below
    "hashes": "#",
    "dots": "1.",
    "slashes": "1/",
}
PREFIX = {
    "failing thousands grouping": "1",
    "newlines after 'answer is'": "the answer is",
    "spaces in scientific notation": "1x10^",
}
SUFFIX = {"failing thousands grouping": "5", "spaces in scientific notation": "a"}

EXAMPLE = Example(id="x", reference="#### 1234")
CHECKER_NAMES = ["clean", "lenient_contains", "any_box", "boxed_any", "first_number", "trigger_phrase"]


def _adversarial(kind: str, size: int) -> str:
    unit = ADVERSARIAL[kind]
    return PREFIX.get(kind, "") + unit * (size // len(unit)) + SUFFIX.get(kind, "")


def _reference_or_error(text: str) -> None:
    try:
        parse_reference(text)
    except ValueError:
        pass  # an unbalanced or empty reference is refused: the point is how fast


def _parsers() -> dict[str, Callable[[str], object]]:
    parsers: dict[str, Callable[[str], object]] = {
        "extract_all_boxed": extract_all_boxed,
        "parse_strict": parse_strict,
        "parse_reference": _reference_or_error,
        "extract_answer_cascade": extract_answer_cascade,
        "extract_last_number": extract_last_number,
        "normalize_number": normalize_number,
        "read_decimal_commas": read_decimal_commas,
        "format_tag_reward": lambda text: format_tag_reward([text]),
        "correctness_reward": lambda text: correctness_reward([text], reference=["#### 1234"]),
    }
    for name in CHECKER_NAMES:
        checker = checkers.CHECKERS.get(name)
        parsers[f"checker {name}"] = lambda text, checker=checker: checker(text, EXAMPLE)
    for mode in EXTRACT_MODES:
        for reference in ("#### 1234", "\\frac{1}{2}"):
            parsers[f"judge {mode} vs {reference}"] = lambda text, m=mode, r=reference: judge_completion(
                text, r, extract=m, timeout_s=30.0
            )
    return parsers


def _clear_caches() -> None:
    """Every cache on the parsing path: each timed call parses, it does not look up."""
    for cached in (
        parsing._boxes,
        parsing.parse_strict,
        parsing.parse_reference,
        numbers.normalize_number,
        parsing.answers_match,
        judge_module._parsed_reference,
    ):
        cached.cache_clear()


def _seconds(function: Callable[[str], object], text: str, repeats: int) -> float:
    """CPU seconds of this process, best of `repeats`: other work on a loaded machine stretches wall
    time, not this. The cyclic garbage collector is off inside the timed call (its pauses are
    noise here, not parsing). math-verify runs in its worker: only a bounded window goes there."""
    best = float("inf")
    for _ in range(repeats):
        _clear_caches()
        gc.disable()
        try:
            started = time.process_time()
            function(text)
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return best


@pytest.fixture(scope="module", autouse=True)
def _warm_math_verify_worker():
    mathverify.math_verify_judge("$1$", "1", timeout_s=120.0)  # its start-up is not parsing time


def _too_slow(small_s: float, big_s: float) -> bool:
    # Below a few milliseconds a ratio is noise (and nothing that fast at 1 MB is quadratic).
    return big_s > 0.02 and big_s > MAX_RATIO * max(small_s, 0.002)


@pytest.mark.parametrize("kind", list(ADVERSARIAL))
def test_parsing_a_megabyte_is_linear(kind: str) -> None:
    small, big = _adversarial(kind, SMALL), _adversarial(kind, BIG)
    slow = {}
    for name, parse in _parsers().items():
        small_s = _seconds(parse, small, repeats=5)
        big_s = _seconds(parse, big, repeats=1)
        if _too_slow(small_s, big_s):  # a closer look before calling it quadratic
            small_s = min(small_s, _seconds(parse, small, repeats=5))
            big_s = min(big_s, _seconds(parse, big, repeats=3))
            if _too_slow(small_s, big_s):
                slow[name] = (round(small_s, 4), round(big_s, 4))
    assert not slow, f"{kind}: 100 kB vs 1 MB seconds, more than {MAX_RATIO}x: {slow}"


def test_a_megabyte_of_unclosed_boxes_is_judged_and_verified_without_a_box() -> None:
    text = _adversarial("unclosed boxes", BIG)
    assert extract_all_boxed(text) == []
    assert judge_completion(text, "\\frac{1}{2}", extract="boxed").reason == "no boxed answer"
    assert judge_completion(text, "#### 3").reason == "not strict format"
    assert checkers.clean_checker(text, EXAMPLE).reason == "not_strict"
    # a well-formed box after the loop still counts
    assert extract_all_boxed(text + "\\boxed{7}") == ["7"]


# --------------------------------------------------------------------------- the same answers as the simple rules

BOX = "\\boxed{"


def _box_spans_by_rescanning(text: str) -> list[tuple[int, int, str]]:
    """The former `_box_spans`: for every box, scan forward for its closing brace (quadratic)."""
    spans = []
    position = text.find(BOX)
    while position != -1:
        start = position + len(BOX)
        depth, end = 1, -1
        for match in re.finditer(r"[{}]", text[start:]):
            depth += 1 if match.group() == "{" else -1
            if not depth:
                end = start + match.start()
                break
        if end == -1:
            position = text.find(BOX, start)
            continue
        spans.append((position, end + 1, text[start:end]))
        position = text.find(BOX, end + 1)
    return spans


_THOUSANDS_REGEX = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+)(?![\d,])")
_ANSWER_IS_REGEX = re.compile(r"(?:final\s+)?answer\s+is\s*:?\s*(.+?)(?:\.(?:\s|$)|\n|$)", re.IGNORECASE)
_TIMES_TEN_REGEX = re.compile(
    r"^(" + numbers._NUMBER + r")\s*(?:\\times|\\cdot|x|\*)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?$"
)


def _texts(pieces: list[str], max_size: int = 14) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_texts(["\\boxed{", "{", "}", "a", "\\boxed{1}", "}}", "\\boxed", " "]))
def test_box_spans_match_rescanning(text: str) -> None:
    assert parsing._box_spans(text) == _box_spans_by_rescanning(text)


@settings(max_examples=3000, deadline=None)
@given(_texts(["1", "12", "123", "1234", ",", ",123", ".", "a", " ", "0"]))
def test_thousands_separators_match_the_regex(text: str) -> None:
    expected = _THOUSANDS_REGEX.sub(lambda match: match.group(1).replace(",", ""), text)
    assert numbers._DIGITS_AND_COMMAS.sub(numbers._drop_thousands_separators, text) == expected


@settings(max_examples=3000, deadline=None)
@given(_texts(["answer is", "Answer  IS", "final ", " ", "\n", "\t", ":", "x", ".", "$", "7"]))
def test_answer_is_matches_the_former_regex(text: str) -> None:
    assert parsing._ANSWER_IS.findall(text) == _ANSWER_IS_REGEX.findall(text)


@settings(max_examples=3000, deadline=None)
@given(_texts(["1", "1.5", "x", "10", "^", "{", "}", " ", "\\times", "\\cdot", "-", "3"]))
def test_times_ten_matches_the_former_regex(text: str) -> None:
    ours, former = numbers._TIMES_TEN.match(text), _TIMES_TEN_REGEX.match(text)
    assert (ours.groups() if ours else None) == (former.groups() if former else None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,234", "1234"),
        ("1,234,567.5", "1234567.5"),
        ("5,1,234", "5,1234"),  # the leftmost grouping that reaches the end of the run
        (",234,567", ",234567"),
        ("1.5,234", "1.5,234"),  # not after a decimal point
        (".1,234,567", ".1,234567"),
        ("1,2345", "1,2345"),
        ("12,34,567", "12,34567"),
        ("1,234,", "1,234,"),
    ],
)
def test_thousands_separators_literal_cases(text: str, expected: str) -> None:
    assert numbers._DIGITS_AND_COMMAS.sub(numbers._drop_thousands_separators, text) == expected
    assert _THOUSANDS_REGEX.sub(lambda match: match.group(1).replace(",", ""), text) == expected
