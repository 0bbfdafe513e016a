"""Literal-string tests for answer parsing (spec section 2 and the comparison rules of section 3)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hackable_rl.answers import mathverify
from hackable_rl.answers.parsing import (
    StrictCompletion,
    answers_match,
    extract_all_boxed,
    extract_answer_cascade,
    extract_boxed,
    extract_last_number,
    normalize_number,
    parse_reference,
    parse_strict,
)

PLUGINS = Path(__file__).parent / "plugins"


@pytest.mark.parametrize(
    ("text", "boxes"),
    [
        ("no box here", []),
        ("\\boxed{7}", ["7"]),
        ("a \\boxed{1} b \\boxed{2}", ["1", "2"]),
        ("\\boxed{\\frac{1}{2}}", ["\\frac{1}{2}"]),
        ("\\boxed{{a}{b{c}}}", ["{a}{b{c}}"]),
        ("\\boxed{}", [""]),
        ("\\boxed{7", []),
        ("\\boxed{7 \\boxed{8}", ["8"]),
        ("\\boxed{\\boxed{3}}", ["\\boxed{3}"]),
    ],
)
def test_extract_all_boxed(text: str, boxes: list[str]) -> None:
    assert extract_all_boxed(text) == boxes


def test_extract_boxed_last_box_wins() -> None:
    assert extract_boxed("first \\boxed{1} then \\boxed{\\frac{3}{4}}") == "\\frac{3}{4}"
    assert extract_boxed("nothing") is None
    assert extract_boxed("\\boxed{unbalanced") is None


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<think>3+4=7</think> \\boxed{7}", StrictCompletion("3+4=7", "7")),
        ("  <think>\nx\n</think>\n\\boxed{ 7 }\n ", StrictCompletion("\nx\n", "7")),
        ("<think>a</think>\\boxed{\\frac{1}{2}}", StrictCompletion("a", "\\frac{1}{2}")),
        ("<think>a</think> \\boxed{}", StrictCompletion("a", "")),
        ("<think></think> \\boxed{5}", StrictCompletion("", "5")),
    ],
)
def test_parse_strict_accepts(completion: str, expected: StrictCompletion) -> None:
    assert parse_strict(completion) == expected


@pytest.mark.parametrize(
    "completion",
    [
        "\\boxed{7}",  # no think block
        "<think>3+4</think>",  # no box
        "<think>a</think><think>b</think> \\boxed{7}",  # two think blocks
        "<think>a <think>b</think> \\boxed{7}",  # nested open tag
        "<think>a</think> x</think> \\boxed{7}",  # stray close tag
        "<think>a</think> \\boxed{7} \\boxed{8}",  # two boxes (a hedge)
        "<think>maybe \\boxed{3}</think> \\boxed{7}",  # a box inside the thinking
        "<think>a</think> \\boxed{7",  # unbalanced braces
        "<think>a</think> \\boxed{{7}",  # unbalanced nested braces
        "<think>a</think> so \\boxed{7}",  # text between the blocks
        "<think>a</think> \\boxed{7}.",  # text after the box
        "hello <think>a</think> \\boxed{7}",  # text before
        "<think>a \\boxed{7}",  # never closed
    ],
)
def test_parse_strict_rejects(completion: str) -> None:
    assert parse_strict(completion) is None


def test_parse_strict_custom_tags() -> None:
    assert parse_strict("<reason>r</reason> \\boxed{2}", "<reason>", "</reason>") == StrictCompletion(
        "r", "2"
    )
    assert parse_strict("<think>r</think> \\boxed{2}", "<reason>", "</reason>") is None


def test_parse_strict_nested_box_content() -> None:
    assert parse_strict("<think>t</think> \\boxed{\\dfrac{\\sqrt{2}}{2}}") == StrictCompletion(
        "t", "\\dfrac{\\sqrt{2}}{2}"
    )


@pytest.mark.parametrize(
    ("reference", "answer"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),
        ("#### 1,000", "1,000"),
        ("The area is $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"),
        ("First \\boxed{1}, finally \\boxed{(1, 2)}", "(1, 2)"),
        ("  42 ", "42"),
        ("\\frac{3}{4}", "\\frac{3}{4}"),
    ],
)
def test_parse_reference(reference: str, answer: str) -> None:
    assert parse_reference(reference) == answer


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("steps #### ", "nothing after '####'"),
        ("\\boxed{3", "unbalanced"),
        ("\\boxed{ }", "empty"),
    ],
)
def test_parse_reference_rejects_with_reason(reference: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_reference(reference)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("72", 72.0),
        ("-3", -3.0),
        ("+5", 5.0),
        ("\u22124", -4.0),
        ("1,000", 1000.0),
        ("1,234,567.5", 1234567.5),
        ("$18", 18.0),
        ("\\$18.00", 18.0),
        ("50%", 50.0),
        ("50\\%", 50.0),
        ("12 apples", 12.0),
        ("5 cm", 5.0),
        ("7\\text{ dollars}", 7.0),
        ("30^\\circ", 30.0),
        ("72.0", 72.0),
        ("0.75", 0.75),
        (".5", 0.5),
        ("\\frac{3}{4}", 0.75),
        ("\\dfrac{3}{4}", 0.75),
        ("-\\frac{1}{2}", -0.5),
        ("\\frac12", 0.5),
        ("3/4", 0.75),
        ("1.5e3", 1500.0),
        ("2E-2", 0.02),
        ("1.5 \\times 10^{3}", 1500.0),
        ("x = 5", 5.0),
        ("{7}", 7.0),
    ],
)
def test_normalize_number(text: str, value: float) -> None:
    assert normalize_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "3 pi", "\\sqrt{2}", "(1, 2)", "1/0", "x", "[0, 1)", "2x+1"])
def test_normalize_number_rejects(text: str) -> None:
    assert normalize_number(text) is None


@pytest.mark.parametrize(
    ("predicted", "reference", "same"),
    [
        ("72", "72", True),
        ("72.0", "72", True),
        ("1,000", "1000", True),
        ("$18", "18", True),
        ("3/4", "\\frac{3}{4}", True),
        ("0.75", "\\dfrac{3}{4}", True),
        ("1.0000001", "1", True),
        ("1.001", "1", False),
        ("71", "72", False),
        ("-72", "72", False),
        ("", "72", False),
        ("0", "0", True),
    ],
)
def test_answers_match_numeric(predicted: str, reference: str, same: bool) -> None:
    assert answers_match(predicted, reference) is same


def test_answers_match_rel_tol() -> None:
    assert answers_match("1.001", "1", rel_tol=1e-2)
    assert not answers_match("1.001", "1", rel_tol=1e-6)


@pytest.mark.parametrize(
    ("predicted", "reference", "same"),
    [
        ("(1, 2)", "(1,2)", True),
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
        ("x^2+2x", "x(x+2)", True),
        ("\\{1,2\\}", "\\{2,1\\}", True),
        ("\\sqrt{4}", "2", True),
        ("(1,2]", "[1,2]", False),
        ("\\sqrt{3}", "2", False),
    ],
)
def test_answers_match_symbolic_through_math_verify(predicted: str, reference: str, same: bool) -> None:
    assert answers_match(predicted, reference, timeout_s=30.0) is same


def test_math_verify_works_off_the_main_thread() -> None:
    results: list[bool] = []
    thread = threading.Thread(
        target=lambda: results.append(answers_match("\\pi/2", "\\frac{\\pi}{2}", timeout_s=30.0))
    )
    thread.start()
    thread.join()
    assert results == [True]


def test_math_verify_timeout_truly_bounds_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))  # the worker inherits sys.path as PYTHONPATH
    worker = mathverify.MathVerifyWorker("slow_compare:sleep_then_agree")
    try:
        assert worker.equal("a", "a", timeout_s=30.0) is True  # starts the worker; fast requests answer
        started = time.perf_counter()
        assert worker.equal("hang", "a", timeout_s=0.3) is None
        assert time.perf_counter() - started < 2.0
        assert worker.equal("a", "a", timeout_s=30.0) is True  # a fresh worker after the kill
    finally:
        worker.close()


def test_math_verify_skips_absurdly_long_answers() -> None:
    before = mathverify.STATS["too_long"]
    assert not answers_match("x" * 2000, "y")
    assert mathverify.STATS["too_long"] == before + 1


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 1,000.", "1,000"),
        ("3 then 4.5", "4.5"),
        ("half is 1/2", "1/2"),
        ("-7 degrees", "-7"),
        ("none", None),
    ],
)
def test_extract_last_number(text: str, number: str | None) -> None:
    assert extract_last_number(text) == number


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think> \\boxed{1} \\boxed{2}", ("2", "boxed")),
        ("so\n#### 72\n", ("72", "hash")),
        ("Thus, the final answer is 3.5. Done", ("3.5", "answer_is")),
        ("The answer is $\\frac{1}{2}$", ("\\frac{1}{2}", "answer_is")),
        ("I got 3 and then 9", ("9", "last_number")),
        ("no idea", (None, "none")),
        ("\\boxed{} and 4", ("4", "last_number")),
    ],
)
def test_extract_answer_cascade(text: str, expected: tuple[str | None, str]) -> None:
    assert extract_answer_cascade(text) == expected
