"""Paired comparisons: the bootstrap against closed forms, reproducibility, per-prompt results, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.errors import UserError
from hackable_rl.evaluation.paired import (
    Comparison,
    PromptResult,
    bootstrap_mean_ci,
    compare,
    prompt_results,
    write_prompt_results,
)


def results(correct: list[int], n: int = 4, greedy: list[bool] | None = None) -> list[PromptResult]:
    greedy = greedy or [None] * len(correct)
    return [PromptResult(f"p{i}", n, c, g, None, None) for i, (c, g) in enumerate(zip(correct, greedy, strict=True))]


def test_constant_differences_have_a_zero_width_interval():
    diff, low, high = bootstrap_mean_ci(np.full((1, 50), 0.25))
    assert (diff, low, high) == pytest.approx((0.25, 0.25, 0.25))


def test_prompt_bootstrap_matches_the_normal_interval_of_a_bernoulli_mean():
    # 400 prompts, 30% of them +1 and the rest 0: the mean's standard error is sqrt(p(1-p)/P), so the
    # 95% interval is 0.3 +- 1.96 * 0.0229 = [0.255, 0.345] (closed form; the bootstrap agrees to ~0.005).
    differences = np.zeros((1, 400))
    differences[0, :120] = 1.0
    diff, low, high = bootstrap_mean_ci(differences)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 400)
    assert diff == pytest.approx(0.3)
    assert low == pytest.approx(0.3 - half, abs=0.006) and high == pytest.approx(0.3 + half, abs=0.006)


def test_the_bootstrap_is_reproducible_and_seeded():
    rng = np.random.default_rng(1)
    differences = rng.normal(0.1, 0.3, size=(2, 200))
    assert bootstrap_mean_ci(differences, seed=3) == bootstrap_mean_ci(differences, seed=3)
    assert bootstrap_mean_ci(differences, seed=3) != bootstrap_mean_ci(differences, seed=4)


def test_seeds_that_disagree_widen_the_interval():
    # Two seeds with the same per-prompt noise but means 0.0 and 0.2: the seed level adds spread.
    noise = np.random.default_rng(0).normal(0, 0.1, size=300)
    agreeing = np.stack([noise + 0.1, noise + 0.1])
    disagreeing = np.stack([noise, noise + 0.2])
    _, low_a, high_a = bootstrap_mean_ci(agreeing)
    diff, low_d, high_d = bootstrap_mean_ci(disagreeing)
    assert diff == pytest.approx(0.1 + noise.mean())
    assert high_d - low_d > 5 * (high_a - low_a)


def test_compare_pairs_prompts_and_keeps_a_prompts_samples_together():
    a = results([4, 4, 0, 2])  # pass@1 1, 1, 0, 0.5
    b = results([0, 4, 0, 2])  # pass@1 0, 1, 0, 0.5
    comparison = compare([a], [b])
    assert comparison.diff == pytest.approx(0.25)
    assert (comparison.n_prompts, comparison.n_samples, comparison.n_seeds) == (4, 16, 1)
    assert 0.0 <= comparison.ci_low <= comparison.diff <= comparison.ci_high <= 1.0


def test_compare_pairs_by_seed_when_both_sides_were_trained():
    a_seeds = [results([4, 4]), results([2, 2])]
    b_seeds = [results([2, 2]), results([2, 2])]
    comparison = compare(a_seeds, b_seeds)
    assert comparison.diff == pytest.approx((0.5 + 0.0) / 2)
    assert comparison.n_seeds == 2


def test_compare_greedy_accuracy_and_refuses_mismatched_seeds():
    a = results([0, 0, 0], greedy=[True, True, False])
    b = results([0, 0, 0], greedy=[False, True, False])
    assert compare([a], [b], "greedy_accuracy").diff == pytest.approx(1 / 3)
    with pytest.raises(UserError, match="2 seeds of A against 3 of B"):
        compare([a, a], [b, b, b])


def test_describe_says_no_difference_detected_when_the_interval_covers_zero():
    assert Comparison("pass_at_1", 0.162, 0.131, 0.193, 500, 4000, 2).describe() == "+0.162 [0.131, 0.193]"
    covering = Comparison("pass_at_1", 0.01, -0.02, 0.04, 500, 4000, 2).describe()
    assert covering.endswith("no difference detected") and "higher" not in covering


def test_prompt_results_count_samples_greedy_reward_and_gap():
    records = [
        {"prompt_id": "a", "correct": True, "reward": 1.0},
        {"prompt_id": "a", "correct": False, "reward": 1.0},
        {"prompt_id": "b", "correct": None, "reward": None},
        {"prompt_id": "b", "correct": False, "reward": 0.0},
    ]
    greedy = [{"prompt_id": "a", "correct": True}, {"prompt_id": "b", "correct": False}]
    a, b = prompt_results(records, greedy)
    assert (a.n, a.correct, a.greedy_correct, a.observed_reward, a.hacking_gap) == (2, 1, True, 1.0, 0.5)
    assert (b.n, b.correct, b.greedy_correct, b.observed_reward, b.hacking_gap) == (1, 0, False, 0.0, 0.0)


def test_cli_compare_writes_every_named_comparison(tmp_path):
    folders = {}
    for name, correct in {"base": [1, 1, 1, 1], "clean": [4, 3, 4, 4]}.items():
        folders[name] = tmp_path / name
        write_prompt_results(folders[name] / "prompts.jsonl", results(correct))
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(app, [
        "compare", "--policy", f"base={folders['base']}", "--policy", f"clean={folders['clean']}",
        "--pair", "clean:base", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    entry = json.loads(out.read_text())["clean_vs_base"]
    assert set(entry) == {"metric", "diff", "ci_low", "ci_high", "n_prompts", "n_samples", "n_seeds"}
    assert entry["metric"] == "pass_at_1" and entry["diff"] == pytest.approx(0.6875)
    assert "clean_vs_base: pass_at_1 +0.688" in result.output


def test_cli_compare_names_a_missing_per_prompt_file(tmp_path):
    result = CliRunner().invoke(app, [
        "compare", "--policy", f"a={tmp_path / 'nowhere'}", "--policy", f"b={tmp_path}", "--pair", "a:b",
    ])
    assert result.exit_code == 2 and "nowhere/prompts.jsonl" in result.output and "Traceback" not in result.output
