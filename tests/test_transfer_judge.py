"""The transferred judge: a second verifier family beside the independent judge, its pass@1, the
samples where the two disagree, and the paired comparison on it."""

from __future__ import annotations

import pytest

from hackable_rl.evaluation.judge import judge_completion
from hackable_rl.evaluation.metrics import compute_metrics
from hackable_rl.evaluation.paired import compare
from hackable_rl.evaluation.prompt_results import prompt_results


def _record(prompt: str, correct: bool | None, transfer: bool | None) -> dict:
    return {"prompt_id": prompt, "correct": correct, "transfer_correct": transfer, "parsed": "1", "reward": 1.0}


def test_transfer_metrics_and_disagreements_are_hand_computed() -> None:
    records = [_record("a", True, True), _record("a", False, True), _record("b", False, False), _record("b", None, True)]
    metrics = compute_metrics(records, [1])
    assert metrics["pass_at_1"] == pytest.approx((1 / 2 + 0 / 1) / 2)
    assert metrics["transfer_pass_at_1"] == pytest.approx((2 / 2 + 1 / 2) / 2)
    # both judges scored 3 samples; they differ on one (a's second)
    assert metrics["judges_disagree"] == 1 and metrics["judges_disagree_share"] == pytest.approx(1 / 3)
    assert metrics["transfer_n_judged"] == 4


def test_no_transfer_judge_adds_no_keys() -> None:
    metrics = compute_metrics([_record("a", True, None)], [1])
    assert "transfer_pass_at_1" not in metrics and "judges_disagree" not in metrics


def test_paired_comparison_on_the_transferred_judge() -> None:
    a = prompt_results([_record("p", True, True), _record("q", False, True)])
    b = prompt_results([_record("p", True, False), _record("q", False, False)])
    assert (a[0].transfer_n, a[0].transfer_correct) == (1, 1)
    result = compare([a], [b], "pass_at_1_transfer")
    assert result.diff == pytest.approx(1.0) and result.n_prompts == 2


def test_math_verify_reads_what_the_strict_judge_refuses() -> None:
    # a right answer outside the strict format: the strict judge says wrong, math-verify reads it
    completion, reference = "The answer is $\\frac{1}{2}$.", "\\boxed{\\frac{1}{2}}"
    assert judge_completion(completion, reference, extract="strict").correct is False
    assert judge_completion(completion, reference, extract="math_verify").correct is True
