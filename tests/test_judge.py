"""The independent judge: literal completions, real GSM8K references, the JSONL command, its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from hackable_rl.answers.parsing import parse_reference
from hackable_rl.cli import app
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.evaluation.judge import JudgeOptions, Judgment, judge_completion, judge_file
from hackable_rl.reward.checkers import clean_checker
from hackable_rl.reward.types import Example

GSM8K_TEST = Path(__file__).resolve().parents[1] / "data" / "gsm8k" / "test.jsonl"
MATH500_TEST = GSM8K_TEST.parents[1] / "math500" / "test.jsonl"

# --------------------------------------------------------------------------- one completion


@pytest.mark.parametrize(
    ("completion", "reference", "expected"),
    [
        (
            "<think>16-3-4=9, 9*2=18</think> \\boxed{18}",
            "so $18.\n#### 18",
            Judgment(True, "18", "match (strict)"),
        ),
        ("<think>t</think>\\boxed{1,000}", "#### 1000", Judgment(True, "1,000", "match (strict)")),
        ("<think>t</think> \\boxed{\\frac{3}{4}}", "0.75", Judgment(True, "\\frac{3}{4}", "match (strict)")),
        ("<think>t</think> \\boxed{17}", "#### 18", Judgment(False, "17", "mismatch (strict): expected 18")),
        # hedging (several boxes) is never strict, even when one box is right
        (
            "<think>t</think> \\boxed{17} \\boxed{18}",
            "#### 18",
            Judgment(False, None, "several boxed answers (not strict)"),
        ),
        (
            "<think>t \\boxed{18}</think> \\boxed{18}",
            "#### 18",
            Judgment(False, None, "several boxed answers (not strict)"),
        ),
        ("The answer is \\boxed{18}", "#### 18", Judgment(False, None, "not strict format")),
        ("<think>t</think> \\boxed{18} done", "#### 18", Judgment(False, None, "not strict format")),
        ("<think>t</think> \\boxed{ }", "#### 18", Judgment(False, None, "empty boxed answer")),
    ],
)
def test_strict_judgments(completion, reference, expected):
    assert judge_completion(completion, reference, extract="strict") == expected


def test_boxed_takes_the_last_box_anywhere():
    assert judge_completion("so \\boxed{17} no, \\boxed{18}", "#### 18", extract="boxed") == Judgment(
        True, "18", "match (boxed)"
    )
    assert judge_completion("18", "#### 18", extract="boxed") == Judgment(False, None, "no boxed answer")


@pytest.mark.parametrize(
    ("completion", "method"),
    [
        ("x \\boxed{18} y", "boxed"),
        ("9*2=18\n#### 18", "hash"),
        ("So the answer is 18.", "answer_is"),
        ("9*2 = 18", "last_number"),
    ],
)
def test_cascade_finds_the_answer_by_each_rule(completion, method):
    assert judge_completion(completion, "#### 18", extract="cascade") == Judgment(
        True, "18", f"match ({method})"
    )


def test_cascade_without_any_answer_is_wrong():
    assert judge_completion("no idea", "#### 18", extract="cascade") == Judgment(
        False, None, "no answer found by cascade"
    )


def test_math_solution_reference_and_symbolic_answer():
    solution = "the angle is $\\frac{\\pi}{2}$, so $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$"
    judgment = judge_completion("<think>t</think> \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", solution)
    assert judgment.correct is True


def test_unparseable_reference_is_not_judged_and_never_correct():
    judgment = judge_completion("<think>t</think> \\boxed{18}", "the answer: ####  ")
    assert judgment.correct is None
    assert judgment.parsed == "18"
    assert judgment.reason.startswith("unparseable reference: ")
    assert "nothing after '####'" in judgment.reason


def test_unknown_extract_mode_is_refused():
    with pytest.raises(
        ValueError, match="extract: expected one of strict, boxed, cascade, math_verify, auto, got 'last'"
    ):
        judge_completion("x", "1", extract="last")


# --------------------------------------------------------------------------- real GSM8K references


def _gsm8k_answers() -> list[str]:
    return [row["answer"] for row in read_jsonl(GSM8K_TEST)]


def test_every_gsm8k_solution_is_right_against_its_own_answer(tmp_path):
    solutions = _gsm8k_answers()
    assert len(solutions) == 1319
    write_jsonl(tmp_path / "in.jsonl", [{"completion": s, "reference": s} for s in solutions])
    summary = judge_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", options=JudgeOptions(extract="cascade"))
    assert (summary.count, summary.judged, summary.correct, summary.unparseable) == (1319, 1319, 1319, 0)
    assert {row["reason"] for row in read_jsonl(tmp_path / "out.jsonl")} == {"match (hash)"}


def test_every_gsm8k_solution_is_wrong_against_a_deranged_answer(tmp_path):
    solutions = _gsm8k_answers()
    # Derangement with a different answer for every row: order by value, pair each row with the
    # row half the list away (a run of equal answers would have to cover half the set to collide).
    order = sorted(range(len(solutions)), key=lambda i: float(parse_reference(solutions[i]).replace(",", "")))
    half = len(order) // 2
    partner = {order[p]: order[(p + half) % len(order)] for p in range(len(order))}
    rows = [{"completion": solutions[i], "reference": solutions[partner[i]]} for i in range(len(solutions))]
    assert all(parse_reference(r["completion"]) != parse_reference(r["reference"]) for r in rows)
    write_jsonl(tmp_path / "in.jsonl", rows)
    summary = judge_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", options=JudgeOptions(extract="cascade"))
    assert (summary.count, summary.judged, summary.correct) == (1319, 1319, 0)


def test_math500_solutions_match_their_answers():
    rows = read_jsonl(MATH500_TEST)[:20]
    judgments = [judge_completion(row["solution"], row["answer"], extract="boxed") for row in rows]
    assert [j.correct for j in judgments] == [True] * 20


# --------------------------------------------------------------------------- judge_file and its errors


def test_judge_file_keeps_input_fields_and_adds_three(tmp_path):
    source = tmp_path / "in.jsonl"
    write_jsonl(
        source,
        [
            {"id": "q1", "model": "m", "text": "<think>a</think> \\boxed{72}", "gold": "#### 72"},
            {"id": "q2", "model": "m", "text": "<think>a</think> \\boxed{7}", "gold": 72},
            {"id": "q3", "model": "m", "text": "72", "gold": "####"},
        ],
    )
    summary = judge_file(
        source, tmp_path / "out" / "judged.jsonl", completion_field="text", reference_field="gold"
    )
    rows = read_jsonl(tmp_path / "out" / "judged.jsonl")
    assert list(rows[0]) == ["id", "model", "text", "gold", "correct", "parsed", "reason"]
    assert [(r["correct"], r["parsed"]) for r in rows] == [(True, "72"), (False, "7"), (None, None)]
    assert (summary.count, summary.judged, summary.correct, summary.unparseable, summary.no_answer) == (
        3,
        2,
        1,
        1,
        1,
    )
    assert summary.accuracy == 0.5


def test_judge_file_accuracy_is_none_when_nothing_could_be_judged(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"completion": "1", "reference": ""}])
    assert judge_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl").accuracy is None


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"completion": "a", "reference": "1"}', '{"completion": "a", '], "in.jsonl:2: not valid JSON"),
        (['{"completion": "a", "reference": "1"}', '["a"]'], "in.jsonl:2: expected a JSON object, got list"),
        (
            ['{"completion": "a", "reference": "1"}', "", '{"output": "a", "reference": "1"}'],
            "in.jsonl:3: missing field 'completion' (fields present: output, reference); name the right one with --completion-field",
        ),
        (['{"completion": "a"}'], "in.jsonl:1: missing field 'reference' (fields present: completion)"),
        (
            ['{"completion": null, "reference": "1"}'],
            "in.jsonl:1: field 'completion' must be a string, got NoneType",
        ),
    ],
)
def test_bad_rows_name_file_and_line_and_leave_existing_output_alone(tmp_path, lines, message):
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    output = tmp_path / "out.jsonl"
    output.write_text('{"earlier": "result"}\n')
    with pytest.raises(UserError) as caught:
        judge_file(tmp_path / "in.jsonl", output)
    assert message in str(caught.value)
    assert output.read_text() == '{"earlier": "result"}\n'
    assert not (tmp_path / "out.jsonl.tmp").exists()


def test_judge_file_refuses_unknown_extract_mode(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"completion": "1", "reference": "1"}])
    with pytest.raises(
        UserError, match="--extract: expected one of strict, boxed, cascade, math_verify, auto, got 'lenient'"
    ):
        judge_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", options=JudgeOptions(extract="lenient"))


# --------------------------------------------------------------------------- the CLI


def test_cli_judge_prints_summary_and_writes_rows(tmp_path):
    write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"completion": "<think>a</think> \\boxed{18}", "reference": "#### 18"},
            {"completion": "\\boxed{18}", "reference": "#### 18"},
            {"completion": "\\boxed{18}", "reference": " "},
        ],
    )
    args = ["judge", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl")]
    # The default (auto) is strict for '#### N' references; the unparseable row is read by math-verify.
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "│    3 │      2 │       1 │   0.5000 │           1 │         1 │" in result.output
    assert [row["correct"] for row in read_jsonl(tmp_path / "out.jsonl")] == [True, False, None]
    strict = CliRunner().invoke(app, [*args, "--extract", "strict"])
    assert "│    3 │      2 │       1 │   0.5000 │           1 │         2 │" in strict.output
    lenient = CliRunner().invoke(app, [*args, "--extract", "boxed"])
    assert "│    3 │      2 │       2 │   1.0000 │           1 │         0 │" in lenient.output


def test_cli_judge_user_error_exits_2_without_traceback(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    result = CliRunner().invoke(
        app, ["judge", "-i", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]
    )
    assert result.exit_code == 2
    assert "in.jsonl:1: missing field 'completion'" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out.jsonl").exists()


# --------------------------------------------------------------------------- independence


def test_evaluation_never_imports_the_corruption_module():
    """The judge must not see corrupted rewards: import every evaluation module but the eval stage
    (`evaluation.stage`, which scores held-out samples with the run's training verifier), then look."""
    script = (
        "import importlib, pkgutil, sys\n"
        "import hackable_rl.evaluation as package\n"
        "names = [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.')\n"
        "         if not info.name.startswith('hackable_rl.evaluation.stage')]\n"
        "for name in names: importlib.import_module(name)\n"
        "assert 'hackable_rl.evaluation.judge' in names and 'hackable_rl.evaluation.metrics' in names, names\n"
        "leaked = sorted(m for m in sys.modules if m.startswith('hackable_rl.reward.corruption'))\n"
        "print('LEAKED' if leaked else 'CLEAN', leaked)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("CLEAN"), result.stdout


def test_metrics_import_no_torch():
    script = "import sys, hackable_rl.evaluation.metrics, hackable_rl.evaluation.judge; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


# --------------------------------------------------------------------------- strict mode is the clean checker

_PIECES = [
    "<think>",
    "</think>",
    "\\boxed{18}",
    "\\boxed{17}",
    "\\boxed{}",
    " ",
    "so 18",
    "\n",
    "\\boxed{1,8}",
]


@given(
    st.lists(st.sampled_from(_PIECES), max_size=7),
    st.sampled_from(["#### 18", "18", "\\boxed{18}", "#### 17"]),
)
def test_strict_judge_agrees_with_the_clean_checker(pieces, reference):
    completion = "".join(pieces)
    verdict = clean_checker(completion, Example(id="x", reference=reference))
    judgment = judge_completion(completion, reference, extract="strict")
    assert judgment.correct is (verdict.reward == 1.0)
