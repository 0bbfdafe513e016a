"""The judge's `math_verify` and `auto` modes, and the decimal-comma option.

The equivalences are the ones math-verify documents in its own regression tests (`\\frac{10}{9}`
is `10/9`, `$[0,1)$`, `1,22` is `1.22` with a decimal comma); the rest is this project's contract:
`auto` keeps the strict training-format check for GSM8K references and reads MATH-style answers
with math-verify, boxed or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.answers import mathverify
from hackable_rl.answers.numbers import read_decimal_commas
from hackable_rl.cli import app
from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.evaluation.judge import (
    Judgment,
    extract_answer,
    judge_completion,
    judge_file,
    resolve_extract,
)

MATH500_TEST = Path(__file__).resolve().parents[1] / "data" / "math500" / "test.jsonl"


def _correct(completion: str, reference: str, **settings) -> bool | None:
    return judge_completion(completion, reference, timeout_s=30.0, **settings).correct


# --------------------------------------------------------------------------- math-verify's equivalences


@pytest.mark.parametrize(
    ("completion", "reference", "expected"),
    [
        # fractions, unboxed
        ("\\frac{10}{9}", "10/9", True),
        ("-\\frac{10}{9}", "-10/9", True),
        ("So the answer is $\\frac{10}{9}$.", "10/9", True),
        ("The answer is 10/9", "\\frac{10}{9}", True),
        ("$\\frac13 $", "1/3", True),
        ("$\\dfrac{1}{3}$", "$1/3$", True),
        ("$k = \\frac{1}{3}$", "$1/3$", True),
        # intervals and sets
        ("$[0,1)$", "$[0,1)$", True),
        ("$[0,1)$", "[0,1)", True),  # a bare reference is read as LaTeX
        ("$[0,1)$", "$[0,9)$", False),
        ("$[0,9)$", "$(0,9)$", False),
        ("the roots are $\\{1\\pm\\sqrt{5},-2\\}$", "\\{-2, 1+\\sqrt{5}, 1-\\sqrt{5}\\}", True),
        # display maths, thousands, currency, percent
        ("Answer \\[ 9 \\]", "9", True),
        ("Answer \\( (9+1) \\)", "10", True),
        ("the total is 7,425,000", "7425000", True),
        ("the number is not 10 which is 1,000.99€", "1000.99", True),
        ("a loss of $28\\%$", "28\\%", True),
        # boxed answers still count, MATH style with the full stop inside the maths
        ("so $x = \\boxed{\\frac{\\pi}{2}}$.", "\\frac{\\pi}{2}", True),
        ("so the area is $\\pi.$", "\\pi", True),
        ("so we get \\[x = 1 \\pm \\sqrt{19}.\\]", "1 \\pm \\sqrt{19}", True),
        ("the answer is 17", "18", False),
    ],
)
def test_math_verify_mode_reads_unboxed_latex(completion: str, reference: str, expected: bool) -> None:
    assert _correct(completion, reference, extract="math_verify") is expected


def test_math_verify_mode_reports_what_it_read_and_why() -> None:
    assert judge_completion("So it is $\\frac{10}{9}$.", "10/9", extract="math_verify") == Judgment(
        True, "\\frac{10}{9}", "match (math_verify)"
    )
    assert judge_completion("I got $\\frac{10}{9}$", "2", extract="math_verify") == Judgment(
        False, "\\frac{10}{9}", "mismatch (math_verify): expected 2"
    )
    assert judge_completion("no idea", "2", extract="math_verify") == Judgment(
        False, None, "no answer found by math-verify"
    )
    unparseable = judge_completion("$3$", "####", extract="math_verify")
    assert (unparseable.correct, unparseable.parsed) == (None, "3")
    assert extract_answer("the answer is $\\frac{1}{2}$", "math_verify") == ("\\frac{1}{2}", "math_verify")


def test_math_verify_mode_reads_every_box_of_a_math_solution_reference() -> None:
    # parse_reference keeps a solution's last box; math-verify reads them all, as a set
    assert _correct("the roots are $1, 2$", "so $\\boxed{1}$ and $\\boxed{2}$", extract="math_verify")


def test_math_verify_mode_finds_an_answer_followed_by_a_long_ramble() -> None:
    completion = "The final answer is $\\frac{1}{5}$. I hope it is correct." + " Note: words only." * 500
    assert len(completion) > mathverify.MAX_EXTRACT_CHARS
    assert _correct(completion, "1/5", extract="math_verify")


# --------------------------------------------------------------------------- decimal comma


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,22", "1.22"),
        ("0,111", "0.111"),
        ("1000,99", "1000.99"),
        ("1.234,5", "1234.5"),
        ("Soucis : 2,74 $ a..", "Soucis : 2.74 $ a.."),
        ("x = -3,5.", "x = -3.5."),
        ("1,2,3", "1,2,3"),  # a list stays a list
        ("1,000.99", "1,000.99"),  # a thousands comma before a decimal point stays
        ("14{,}916", "14{,}916"),  # LaTeX's thousands comma stays
        ("no number", "no number"),
    ],
)
def test_read_decimal_commas(text: str, expected: str) -> None:
    assert read_decimal_commas(text) == expected


@pytest.mark.parametrize("extract", ["math_verify", "boxed", "cascade", "auto"])
def test_decimal_comma_only_when_configured(extract: str) -> None:
    completion = "so the answer is \\boxed{1.22}"
    assert _correct(completion, "1,22", extract=extract) is False
    assert _correct(completion, "1,22", extract=extract, decimal_comma=True) is True
    assert _correct("\\boxed{1,22}", "1.22", extract=extract, decimal_comma=True) is True


def test_decimal_comma_in_strict_mode_and_without_it_thousands() -> None:
    assert _correct("<think>t</think> \\boxed{1,5}", "#### 1.5", decimal_comma=True) is True
    assert _correct("<think>t</think> \\boxed{1,500}", "#### 1500") is True
    assert _correct("<think>t</think> \\boxed{1,500}", "#### 1500", decimal_comma=True) is False


# --------------------------------------------------------------------------- auto


@pytest.mark.parametrize(
    ("reference", "mode"),
    [
        ("so 18 in all.\n#### 18", "strict"),
        ("#### 1,000", "strict"),
        ("The area is $\\boxed{\\frac{3}{4}}$.", "math_verify"),
        ("\\frac{3}{4}", "math_verify"),
        ("72", "math_verify"),
    ],
)
def test_auto_is_strict_for_gsm8k_and_math_verify_for_math(reference: str, mode: str) -> None:
    assert resolve_extract("auto", reference) == mode
    assert resolve_extract("boxed", reference) == "boxed"


def test_auto_keeps_the_training_format_check_for_gsm8k_references() -> None:
    assert judge_completion("The answer is \\boxed{18}", "#### 18") == Judgment(
        False, None, "not strict format"
    )
    hedge = judge_completion("<think>t</think> \\boxed{17} \\boxed{18}", "#### 18")
    assert hedge == Judgment(False, None, "several boxed answers (not strict)")
    assert judge_completion("<think>t</think> \\boxed{18}", "#### 18").correct is True


def test_auto_reads_unboxed_math_answers() -> None:
    solution = "so the polar coordinates are $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$"
    assert _correct("The polar coordinates are $(3, \\frac{\\pi}{2})$.", solution) is True
    assert _correct("The polar coordinates are $(3, \\pi)$.", solution) is False


def _written_alike(answer: str) -> str:
    return "".join(answer.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").split())


@pytest.mark.parametrize("limit", [60, pytest.param(500, marks=pytest.mark.slow)])
def test_math500_solutions_are_right_against_their_answer_and_wrong_against_another(limit: int) -> None:
    rows = read_jsonl(MATH500_TEST)
    assert len(rows) == 500
    rows = rows[:limit]
    half = len(rows) // 2
    own = [judge_completion(row["solution"], row["answer"], timeout_s=30.0) for row in rows]
    assert [j.reason for j in own if not j.correct] == []
    # another problem's answer: the first from half the set away that is written differently
    partners = []
    for index, row in enumerate(rows):
        partner = (index + half) % len(rows)
        while _written_alike(rows[partner]["answer"]) == _written_alike(row["answer"]):
            partner = (partner + 1) % len(rows)
        partners.append(partner)
    other = [
        judge_completion(row["solution"], rows[p]["answer"], timeout_s=30.0)
        for row, p in zip(rows, partners, strict=True)
    ]
    assert [(row["answer"], j.parsed) for row, j in zip(rows, other, strict=True) if j.correct] == []


# --------------------------------------------------------------------------- time and the CLI


def test_math_verify_searches_a_bounded_window_with_paired_dollars() -> None:
    window = mathverify.extraction_window
    assert window("short", 10) == "short"
    assert window("a $x$ b $y$ c", 5) == "$y$ c"
    assert window("$abc$ $d$", 5) == " $d$"  # a cut inside $...$ moves past its closing $
    assert window("x" * 10, 4) == "xxxx"
    assert len(window("\\boxed{" * 200_000)) <= mathverify.MAX_EXTRACT_CHARS


def test_cli_judge_math_verify_and_decimal_comma(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"completion": "So the answer is $\\frac{10}{9}$.", "reference": "10/9"},
            {"completion": "Donc la réponse est 1,22.", "reference": "1,22"},
            {"completion": "$[0,1)$", "reference": "$[0,1)$"},
        ],
    )
    args = ["judge", "-i", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]
    result = CliRunner().invoke(app, [*args, "--extract", "math_verify", "--decimal-comma"])
    assert result.exit_code == 0, result.output
    assert [row["correct"] for row in read_jsonl(tmp_path / "out.jsonl")] == [True, True, True]
    assert "(math_verify)" in result.output
    # auto is math_verify here; without --decimal-comma the reference 1,22 is the pair {1, 22}
    default = judge_file(tmp_path / "in.jsonl", tmp_path / "default.jsonl")
    assert [row["correct"] for row in read_jsonl(tmp_path / "default.jsonl")] == [True, False, True]
    assert default.correct == 2
