"""Paired comparisons: t-intervals across replicates and the conditional prompt bootstrap against closed
forms, reproducibility, per-prompt results, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.errors import UserError
from hackable_rl.evaluation.paired import (
    NO_TEST,
    Comparison,
    compare,
    compare_matrix,
    conditional_ci,
    equivalence_test,
    equivalence_verdict,
)
from hackable_rl.evaluation.prompt_results import PromptResult, prompt_results, write_prompt_results


def results(correct: list[int], n: int = 4, greedy: list[bool] | None = None) -> list[PromptResult]:
    greedy = greedy or [None] * len(correct)
    return [PromptResult(f"p{i}", n, c, g, None, None) for i, (c, g) in enumerate(zip(correct, greedy, strict=True))]


def test_constant_differences_have_a_zero_width_conditional_interval():
    low, high = conditional_ci(np.full((1, 50), 0.25))
    assert (low, high) == pytest.approx((0.25, 0.25))


def test_prompt_bootstrap_matches_the_normal_interval_of_a_bernoulli_mean():
    # 400 prompts, 30% of them +1 and the rest 0: the mean's standard error is sqrt(p(1-p)/P), so the
    # 95% interval is 0.3 +- 1.96 * 0.0229 = [0.255, 0.345] (closed form; the bootstrap agrees to ~0.005).
    differences = np.zeros((1, 400))
    differences[0, :120] = 1.0
    low, high = conditional_ci(differences)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 400)
    assert low == pytest.approx(0.3 - half, abs=0.006) and high == pytest.approx(0.3 + half, abs=0.006)


def test_the_conditional_bootstrap_is_reproducible_and_seeded():
    rng = np.random.default_rng(1)
    differences = rng.normal(0.1, 0.3, size=(2, 200))
    assert conditional_ci(differences, seed=3) == conditional_ci(differences, seed=3)
    assert conditional_ci(differences, seed=3) != conditional_ci(differences, seed=4)


def test_replicates_that_disagree_widen_the_interval_and_the_prompt_bootstrap_cannot_see_it():
    # Two replicates with the same per-prompt noise but means 0.0 and 0.2: the replicate level adds spread.
    noise = np.random.default_rng(0).normal(0, 0.1, size=300)
    agreeing = compare_matrix("pass_at_1", np.stack([noise + 0.1, noise + 0.1]), 0)
    disagreeing = compare_matrix("pass_at_1", np.stack([noise, noise + 0.2]), 0)
    assert disagreeing.diff == pytest.approx(0.1 + noise.mean())
    assert disagreeing.ci_high - disagreeing.ci_low > 5 * (agreeing.ci_high - agreeing.ci_low)
    assert disagreeing.per_replicate == pytest.approx([noise.mean(), noise.mean() + 0.2])
    conditional = disagreeing.conditional_ci_high - disagreeing.conditional_ci_low
    assert conditional < (disagreeing.ci_high - disagreeing.ci_low) / 10


def test_compare_pairs_prompts_and_one_replicate_has_no_interval():
    a = results([4, 4, 0, 2])  # pass@1 1, 1, 0, 0.5
    b = results([0, 4, 0, 2])  # pass@1 0, 1, 0, 0.5
    comparison = compare([a], [b])
    assert comparison.diff == pytest.approx(0.25)
    assert (comparison.n_prompts, comparison.n_samples, comparison.n_replicates) == (4, 16, 1)
    assert comparison.ci_low is None and comparison.reason and not comparison.detected
    assert 0.0 <= comparison.conditional_ci_low <= comparison.diff <= comparison.conditional_ci_high <= 1.0


def test_compare_pairs_by_replicate_when_both_sides_were_trained():
    a_seeds = [results([4, 4]), results([2, 2]), results([3, 3])]
    b_seeds = [results([2, 2]), results([2, 2]), results([2, 2])]
    comparison = compare(a_seeds, b_seeds)
    assert comparison.per_replicate == pytest.approx([0.5, 0.0, 0.25])
    assert comparison.diff == pytest.approx(0.25) and comparison.n_replicates == 3
    assert comparison.sd == pytest.approx(0.25)
    assert comparison.ci_low < 0 < comparison.ci_high and not comparison.detected


def test_compare_greedy_accuracy_and_refuses_mismatched_seeds():
    a = results([0, 0, 0], greedy=[True, True, False])
    b = results([0, 0, 0], greedy=[False, True, False])
    assert compare([a], [b], "greedy_accuracy").diff == pytest.approx(1 / 3)
    with pytest.raises(UserError, match="2 seeds of A against 3 of B"):
        compare([a, a], [b, b, b])


def _comparison(diff: float, low: float | None, high: float | None) -> Comparison:
    return Comparison("pass_at_1", diff, low, high, 500, 4000, 3, [diff] * 3, 0.01, 0.01, low or diff, high or diff)


def test_describe_says_no_difference_detected_when_the_interval_covers_zero():
    assert _comparison(0.162, 0.131, 0.193).describe() == "+0.162 [0.131, 0.193]"
    covering = _comparison(0.01, -0.02, 0.04).describe()
    assert covering.endswith("no difference detected") and "higher" not in covering


def test_tost_verdicts_follow_the_declared_margin():
    # (95% CI, 90% CI): the 90% CI inside (-m, m) is "equivalent", even beside a detected difference
    assert equivalence_verdict((-0.012, 0.014), (-0.009, 0.011), 0.02) == "equivalent"
    assert equivalence_verdict((0.001, 0.009), (0.002, 0.008), 0.02) == "equivalent"
    assert equivalence_verdict((0.010, 0.050), (0.014, 0.046), 0.02) == "different"
    assert equivalence_verdict((-0.030, 0.010), (-0.025, 0.006), 0.02) == "no difference detected"
    assert equivalence_verdict((-0.030, 0.010), (-0.020, 0.006), 0.02) == "no difference detected"  # open interval


def test_equivalence_of_a_constant_difference_is_its_value_against_the_margin():
    # every replicate's difference is 0.01: both intervals are [0.01, 0.01], so only the margin decides
    constant = np.full((3, 50), 0.01)
    assert equivalence_test(constant, 0.02).verdict == "equivalent"
    narrow = equivalence_test(constant, 0.005)
    assert (narrow.ci90_low, narrow.ci90_high, narrow.verdict) == (pytest.approx(0.01), pytest.approx(0.01), "different")
    assert equivalence_test(np.full((1, 50), 0.01), 0.02).verdict == NO_TEST


def test_equivalence_reads_the_90_t_interval_across_replicates():
    # replicate differences -0.01, 0, +0.01: mean 0, sd 0.01, t(0.95, 2) = 2.92 -> 90% CI 0 +- 0.0169
    differences = np.array([[-0.01] * 4, [0.0] * 4, [0.01] * 4])
    half = 2.919985580355516 * 0.01 / math.sqrt(3)
    test = equivalence_test(differences, 0.02)
    assert (test.ci90_low, test.ci90_high) == pytest.approx((-half, half))
    assert test.verdict == "equivalent"
    assert equivalence_test(differences, 0.015).verdict == "no difference detected"


def test_a_margin_adds_the_test_and_the_record_round_trips():
    a, b = results([4, 4, 0, 2] * 10), results([4, 4, 0, 2] * 10)
    plain = compare([a, a, a], [b, b, b])
    assert list(plain.record())[:7] == ["metric", "diff", "ci_low", "ci_high", "n_prompts", "n_samples", "n_replicates"]
    tested = compare([a, a, a], [b, b, b], margin=0.02)
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
    assert {"n_replicates", "per_replicate", "sd", "p_value", "p_holm", "family", "interval_method",
            "conditional_ci_low", "conditional_ci_high", "reason"} <= set(entry)
    assert entry["metric"] == "pass_at_1" and entry["diff"] == pytest.approx(0.6875)
    assert entry["ci_low"] is None and entry["reason"].startswith("one replicate")  # one folder each: a pilot
    assert "clean_vs_base: pass_at_1 +0.688" in result.output


def test_cli_compare_names_a_missing_per_prompt_file(tmp_path):
    result = CliRunner().invoke(app, [
        "compare", "--policy", f"a={tmp_path / 'nowhere'}", "--policy", f"b={tmp_path}", "--pair", "a:b",
    ])
    assert result.exit_code == 2 and "nowhere/prompts.jsonl" in result.output and "Traceback" not in result.output


def test_cli_compare_margin_adds_the_90_ci_the_verdict_and_holm(tmp_path):
    folders: dict[str, list] = {}
    replicates = {"base": [[1, 1, 1, 1], [1, 2, 1, 1], [1, 1, 2, 1]], "clean": [[4, 3, 4, 4], [4, 4, 4, 3], [3, 4, 4, 4]]}
    for name, per_replicate in replicates.items():
        folders[name] = [tmp_path / name / f"s{index}" for index in range(3)]
        for folder, correct in zip(folders[name], per_replicate, strict=True):
            write_prompt_results(folder / "prompts.jsonl", results(correct))
    policies = [f"{name}={','.join(map(str, paths))}" for name, paths in folders.items()]
    args = ["compare", "--policy", policies[0], "--policy", policies[1],
            "--pair", "clean:base", "--pair", "clean:clean", "--out", str(tmp_path / "compare.json")]
    result = CliRunner().invoke(app, [*args, "--margin", "0.05"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "compare.json").read_text())
    entry = written["clean_vs_base"]
    assert list(entry)[-4:] == ["margin", "ci90_low", "ci90_high", "verdict"]
    assert entry["margin"] == 0.05 and entry["verdict"] == "different" and entry["n_replicates"] == 3
    assert entry["ci_low"] <= entry["ci90_low"] <= entry["diff"] <= entry["ci90_high"] <= entry["ci_high"]
    assert entry["p_holm"] >= entry["p_value"] and entry["family"] == "pass@1 of the declared pairs"
    assert written["machine"].startswith("machine not recorded")  # the same bytes on every machine, and why
    from hackable_rl.report.single import comparison_lines

    assert [line.split(":")[0] for line in comparison_lines(tmp_path / "compare.json")] == ["- clean_vs_base",
                                                                                           "- clean_vs_clean"]
    assert written["clean_vs_clean"]["verdict"] == "equivalent"  # identical results: both CIs are [0, 0]
    assert "clean_vs_clean: pass_at_1 +0.000 [0.000, 0.000]" in result.output
    refused = CliRunner().invoke(app, [*args, "--margin", "0"])
    assert refused.exit_code == 2 and "compare --margin: equivalence margin 0.0" in refused.output


def test_cli_compare_refuses_an_out_inside_a_folder_it_reads(tmp_path):
    folder = tmp_path / "mb"
    write_prompt_results(folder / "prompts.jsonl", results([1, 2, 3, 4]))
    before = (folder / "prompts.jsonl").read_bytes()
    result = CliRunner().invoke(app, ["compare", "--policy", f"a={folder}", "--policy", f"b={folder}", "--pair", "a:b",
                                      "--out", str(folder / "prompts.jsonl")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"inside policy a's folder {folder}, which compare reads" in result.output
    assert (folder / "prompts.jsonl").read_bytes() == before
