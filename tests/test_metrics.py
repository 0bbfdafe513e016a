"""Metrics of spec section 6: hand-computed values, brute-force pass@k, undefined -> None."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.evaluation.metrics import (
    compute_metrics,
    metrics_to_json,
    normalise_reward,
    pass_at_k,
    pearson,
    point_biserial,
    summary_table,
    write_metrics_json,
    write_summary_csv,
)

# --------------------------------------------------------------------------- pass@k


def test_pass_at_k_hand_values():
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k: every 3-subset holds a correct one
    assert pass_at_k(5, 5, 5) == 1.0


def _brute_force(n: int, c: int, k: int) -> Fraction:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(outcomes[i] for i in subset) for subset in subsets), len(subsets))


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_enumeration_of_all_k_subsets(case):
    n, c, k = case
    assert pass_at_k(n, c, k) == pytest.approx(float(_brute_force(n, c, k)), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    n, c, k = 2000, 10, 100
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9)
    assert pass_at_k(100_000, 1, 1) == pytest.approx(1e-5)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k"):
        pass_at_k(n, c, k)


# --------------------------------------------------------------------------- constructed records

# Prompt a: 2 of 4 right. Prompt b: all wrong, three of them rewarded anyway. Prompt c: its
# reference could not be parsed (correct None), so it counts only in coverage, answers and lengths.
RECORDS = [
    {"prompt_id": "a", "correct": True, "parsed": "72", "reward": 1.0, "thinking_tokens": 10},
    {"prompt_id": "a", "correct": True, "parsed": "7 2", "reward": 0.0, "thinking_tokens": 20},
    {"prompt_id": "a", "correct": False, "parsed": "5", "reward": 1.0, "thinking_tokens": 30},
    {"prompt_id": "a", "correct": False, "parsed": "7", "reward": 0.0, "thinking_tokens": 40},
    {"prompt_id": "b", "correct": False, "parsed": "3", "reward": 1.0, "thinking_tokens": 50},
    {"prompt_id": "b", "correct": False, "parsed": "3", "reward": 1.0, "thinking_tokens": None},
    {"prompt_id": "b", "correct": False, "parsed": "3", "reward": None, "thinking_tokens": 70},
    {"prompt_id": "b", "correct": False, "parsed": None, "reward": 0.0, "thinking_tokens": 80},
    {"prompt_id": "c", "correct": None, "parsed": "1", "reward": 1.0, "thinking_tokens": 90},
    {"prompt_id": "c", "correct": None, "parsed": "2", "reward": 0.0, "thinking_tokens": 100},
]


@pytest.fixture
def metrics(tmp_path):
    path = tmp_path / "generations.jsonl"
    write_jsonl(path, RECORDS)
    return compute_metrics(read_jsonl(path), k_values=[1, 2, 4, 5])


def test_counts(metrics):
    assert metrics["n_samples"] == 10
    assert metrics["n_prompts"] == 3
    assert metrics["n_judged"] == 8
    assert metrics["n_unjudged"] == 2
    assert metrics["n_with_reward"] == 9


def test_correctness_metrics(metrics):
    assert metrics["accuracy"] == pytest.approx(2 / 8)
    assert metrics["pass_at_1"] == pytest.approx((2 / 4 + 0 / 4) / 2)
    assert metrics["pass_at_2"] == pytest.approx((5 / 6 + 0) / 2)
    assert metrics["pass_at_4"] == pytest.approx((1 + 0) / 2)
    assert metrics["pass_at_4_prompts"] == 2
    assert metrics["pass_at_5"] is None  # no prompt has 5 judged samples
    assert metrics["pass_at_5_prompts"] == 0


def test_answer_consistency_and_diversity(metrics):
    # a: "72" twice (whitespace ignored) of 4, 3 distinct; b: "3" 3 of 4, 1 distinct; c: 1 of 2, 2 distinct
    assert metrics["answer_consistency"] == pytest.approx((2 / 4 + 3 / 4 + 1 / 2) / 3)
    assert metrics["answer_diversity"] == pytest.approx((3 / 4 + 1 / 4 + 2 / 2) / 3)


def test_reward_metrics_fp_fn_and_hacking_gap(metrics):
    assert metrics["observed_reward"] == pytest.approx(5 / 9)
    assert metrics["coverage"] == pytest.approx(9 / 10)
    # wrong with a reward: a(1.0, 0.0), b(1.0, 1.0, 0.0): 3 of 5 pass
    assert metrics["false_positive_rate"] == pytest.approx(3 / 5)
    # right with a reward: a(1.0, 0.0): 1 of 2 denied
    assert metrics["false_negative_rate"] == pytest.approx(1 / 2)
    # on the 7 with both: rewards 1,0,1,0,1,1,0 minus correctness 1,1,0,0,0,0,0
    assert metrics["hacking_gap"] == pytest.approx(2 / 7)
    assert metrics["reward_correctness_pearson"] == pytest.approx(-1 / math.sqrt(120))
    assert metrics["reward_correctness_point_biserial"] == pytest.approx(-1 / math.sqrt(120))


def test_thinking_length_stats(metrics):
    assert metrics["thinking_tokens_mean"] == pytest.approx(490 / 9)
    assert metrics["thinking_tokens_median"] == 50
    assert metrics["thinking_tokens_p90"] == pytest.approx(92)  # 90 + 0.2 * (100 - 90)
    assert metrics["thinking_tokens_correct_mean"] == 15
    assert metrics["thinking_tokens_correct_p90"] == pytest.approx(19)
    assert metrics["thinking_tokens_incorrect_mean"] == 54
    assert metrics["thinking_tokens_incorrect_median"] == 50
    assert metrics["thinking_tokens_incorrect_p90"] == pytest.approx(76)
    # no record carries thinking_words: undefined, not 0
    assert metrics["thinking_words_mean"] is None
    assert metrics["thinking_words_incorrect_p90"] is None


# --------------------------------------------------------------------------- undefined -> None


def test_no_records_gives_counts_zero_and_every_metric_none():
    metrics = compute_metrics([], k_values=[1, 2])
    counts = {key for key in metrics if key.startswith("n_") or key.endswith("_prompts")}
    assert all(metrics[key] == 0 for key in counts)
    assert all(value is None for key, value in metrics.items() if key not in counts)


def test_all_correct_leaves_false_positive_rate_undefined():
    records = [{"prompt_id": "p", "correct": True, "parsed": "1", "reward": r} for r in (1.0, 0.0)]
    metrics = compute_metrics(records, k_values=[1])
    assert metrics["false_positive_rate"] is None
    assert metrics["false_negative_rate"] == 0.5
    assert metrics["reward_correctness_pearson"] is None  # correctness is constant
    assert metrics["reward_correctness_point_biserial"] is None
    assert metrics["hacking_gap"] == -0.5


def test_no_rewards_leaves_reward_metrics_undefined_but_coverage_zero():
    records = [{"prompt_id": "p", "correct": c, "parsed": "1", "reward": None} for c in (True, False)]
    metrics = compute_metrics(records, k_values=[1])
    assert metrics["coverage"] == 0.0
    for key in ("observed_reward", "false_positive_rate", "false_negative_rate", "hacking_gap"):
        assert metrics[key] is None, key


def test_reward_range_normalises_before_thresholding():
    assert normalise_reward(0.0, -1.0, 1.0) == 0.5
    assert normalise_reward(3.0, -1.0, 1.0) == 1.0
    records = [
        {"prompt_id": "p", "correct": False, "reward": 0.2},
        {"prompt_id": "p", "correct": True, "reward": -1.0},
    ]
    metrics = compute_metrics(records, k_values=[1], reward_range=(-1.0, 1.0))
    assert metrics["false_positive_rate"] == 1.0  # 0.2 -> 0.6 >= 0.5
    assert metrics["hacking_gap"] == pytest.approx((0.6 - 0 + 0 - 1) / 2)


def test_bad_records_are_named():
    with pytest.raises(ValueError, match="record 1: missing 'prompt_id'"):
        compute_metrics([{"prompt_id": "p", "correct": True}, {"correct": True}], k_values=[1])
    with pytest.raises(ValueError, match="record 0: 'correct' must be true, false or null"):
        compute_metrics([{"prompt_id": "p", "correct": "yes"}], k_values=[1])


def test_point_biserial_equals_pearson_on_continuous_rewards():
    flags = [True, False, True, True, False, False]
    rewards = [0.9, 0.2, 0.4, 1.0, 0.6, 0.0]
    assert point_biserial(flags, rewards) == pytest.approx(pearson([float(f) for f in flags], rewards))
    assert pearson([1.0], [2.0]) is None


# --------------------------------------------------------------------------- writing


def test_metrics_json_writes_null_and_refuses_nan(tmp_path):
    path = write_metrics_json(tmp_path / "m" / "metrics.json", compute_metrics([], k_values=[1]))
    assert json.loads(path.read_text())["hacking_gap"] is None
    assert '"hacking_gap": null' in path.read_text()
    with pytest.raises(ValueError, match="not finite"):
        metrics_to_json({"x": float("nan")})


def test_summary_table_leaves_undefined_cells_blank_in_csv(tmp_path):
    rows = [
        {"run": "r1", "step": 100, "pass_at_1": 0.5, "false_positive_rate": None},
        {"run": "r1", "step": 200, "pass_at_1": 0.625, "hacking_gap": 0.25},
    ]
    table = summary_table(rows)
    assert list(table.columns) == ["run", "step", "pass_at_1", "false_positive_rate", "hacking_gap"]
    text = write_summary_csv(table, tmp_path / "summary.csv").read_text()
    assert text.splitlines() == [
        "run,step,pass_at_1,false_positive_rate,hacking_gap",
        "r1,100,0.5,,",
        "r1,200,0.625,,0.25",
    ]
    assert "nan" not in text.lower()
