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
    equivalence_test,
    equivalence_verdict,
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


def test_tost_verdicts_follow_the_declared_margin():
    # (95% CI, 90% CI): the 90% CI inside (-m, m) is "equivalent", even beside a detected difference
    assert equivalence_verdict((-0.012, 0.014), (-0.009, 0.011), 0.02) == "equivalent"
    assert equivalence_verdict((0.001, 0.009), (0.002, 0.008), 0.02) == "equivalent"
    assert equivalence_verdict((0.010, 0.050), (0.014, 0.046), 0.02) == "different"
    assert equivalence_verdict((-0.030, 0.010), (-0.025, 0.006), 0.02) == "no difference detected"
    assert equivalence_verdict((-0.030, 0.010), (-0.020, 0.006), 0.02) == "no difference detected"  # open interval


def test_equivalence_of_a_constant_difference_is_its_value_against_the_margin():
    # every replicate mean is 0.01: both CIs are [0.01, 0.01], so only the margin decides
    constant = np.full((1, 50), 0.01)
    assert equivalence_test(constant, 0.02).verdict == "equivalent"
    narrow = equivalence_test(constant, 0.005)
    assert (narrow.ci90_low, narrow.ci90_high, narrow.verdict) == (pytest.approx(0.01), pytest.approx(0.01), "different")


def test_equivalence_matches_the_normal_interval_of_a_mean_zero_difference():
    # 400 prompts, half +0.1 and half -0.1: mean 0, standard error 0.1 / sqrt(400) = 0.005, so the 90%
    # CI is 0 +- 1.645 * 0.005 = [-0.0082, +0.0082] (closed form; the bootstrap agrees to ~0.001)
    differences = np.tile([0.1, -0.1], 200)[None, :]
    half = 1.645 * 0.1 / math.sqrt(400)
    test = equivalence_test(differences, 0.012)
    assert test.ci90_low == pytest.approx(-half, abs=0.0012) and test.ci90_high == pytest.approx(half, abs=0.0012)
    assert test.verdict == "equivalent"
    assert equivalence_test(differences, 0.006).verdict == "no difference detected"
    assert equivalence_test(differences, 0.012, seed=3) == equivalence_test(differences, 0.012, seed=3)


def test_a_margin_adds_the_test_and_without_one_the_record_is_unchanged():
    a, b = results([4, 4, 0, 2] * 10), results([4, 4, 0, 2] * 10)
    plain = compare([a], [b])
    assert list(plain.record()) == ["metric", "diff", "ci_low", "ci_high", "n_prompts", "n_samples", "n_seeds"]
    tested = compare([a], [b], margin=0.02)
    assert tested.record() == plain.record() | {"margin": 0.02, "ci90_low": 0.0, "ci90_high": 0.0, "verdict": "equivalent"}
    assert tested.describe() == "+0.000 [0.000, 0.000], equivalent: 90% CI [+0.000, +0.000] inside ±0.020"
    assert Comparison.from_record(tested.record()) == tested and Comparison.from_record(plain.record()) == plain


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


def test_cli_compare_margin_adds_the_90_ci_and_the_verdict(tmp_path):
    folders = {}
    for name, correct in {"base": [1, 1, 1, 1], "clean": [4, 3, 4, 4]}.items():
        folders[name] = tmp_path / name
        write_prompt_results(folders[name] / "prompts.jsonl", results(correct))
    args = ["compare", "--policy", f"base={folders['base']}", "--policy", f"clean={folders['clean']}",
            "--pair", "clean:base", "--pair", "clean:clean", "--out", str(tmp_path / "compare.json")]
    result = CliRunner().invoke(app, [*args, "--margin", "0.05"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "compare.json").read_text())
    entry = written["clean_vs_base"]
    assert list(entry)[-4:] == ["margin", "ci90_low", "ci90_high", "verdict"]
    assert entry["margin"] == 0.05 and entry["verdict"] == "different"
    assert entry["ci_low"] <= entry["ci90_low"] <= entry["diff"] <= entry["ci90_high"] <= entry["ci_high"]
    assert written["clean_vs_clean"]["verdict"] == "equivalent"  # identical results: both CIs are [0, 0]
    assert "clean_vs_clean: pass_at_1 +0.000 [0.000, 0.000], equivalent: 90% CI" in result.output
    refused = CliRunner().invoke(app, [*args, "--margin", "0"])
    assert refused.exit_code == 2 and "compare --margin: equivalence margin 0.0" in refused.output
