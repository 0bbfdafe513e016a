"""Intervals across replicates (evaluation.replicates) and Holm's correction, on constructed data."""

from __future__ import annotations

import numpy as np
import pytest

from hackable_rl.evaluation.paired import compare_matrix, conditional_ci, equivalence_test
from hackable_rl.evaluation.replicates import ONE_REPLICATE, holm, replicate_interval


def test_the_interval_is_the_t_interval_over_per_replicate_differences():
    # three replicates whose prompt means are 0.10, 0.20 and 0.30: mean 0.2, sd 0.1, t(0.975, 2) = 4.303
    differences = np.array([[0.0, 0.2], [0.1, 0.3], [0.2, 0.4]])
    interval = replicate_interval(differences)
    assert interval.per_replicate == pytest.approx((0.1, 0.2, 0.3))
    assert interval.sd == pytest.approx(0.1)
    half = 4.302652729911275 * 0.1 / np.sqrt(3)
    assert (interval.ci_low, interval.ci_high) == pytest.approx((0.2 - half, 0.2 + half))
    assert interval.n_replicates == 3


def test_one_replicate_has_no_interval_and_says_why():
    interval = replicate_interval(np.array([[0.1, 0.3, 0.2]]))
    assert interval.ci_low is None and interval.ci_high is None and interval.p_value is None
    assert interval.reason == ONE_REPLICATE
    assert not interval.detected
    comparison = compare_matrix("pass_at_1", np.array([[0.1, 0.3, 0.2]]), n_samples=24)
    assert comparison.ci_low is None and ONE_REPLICATE in comparison.describe()
    assert equivalence_test(np.array([[0.0, 0.01]]), 0.02).ci90_low is None


def test_a_known_between_replicate_variance_is_covered_at_its_nominal_rate():
    """Each replicate's true effect varies around 0.1 with SD 0.05 (a warm start's own level), and its
    500 prompts add noise on top: the 95% interval must cover 0.1 in about 95% of simulated studies."""
    rng = np.random.default_rng(0)
    trials, replicates, prompts, covered = 2000, 5, 500, 0
    for _ in range(trials):
        effects = 0.1 + rng.normal(0, 0.05, size=(replicates, 1))
        differences = effects + rng.normal(0, 0.3, size=(replicates, prompts))
        interval = replicate_interval(differences)
        covered += interval.ci_low <= 0.1 <= interval.ci_high
    rate = covered / trials
    assert 0.93 <= rate <= 0.97, rate


def test_the_prompt_bootstrap_alone_would_undercover_that_variance():
    """The conditional interval is not a replication interval: under between-replicate variance it
    covers the true effect far less often than 95% (why it is only ever a labelled secondary)."""
    rng = np.random.default_rng(1)
    trials, covered = 100, 0
    for _ in range(trials):
        effects = 0.1 + rng.normal(0, 0.05, size=(3, 1))
        differences = effects + rng.normal(0, 0.3, size=(3, 500))
        low, high = conditional_ci(differences, replicates=400)
        covered += low <= 0.1 <= high
    assert covered / trials < 0.8


def test_holm_adjusts_step_down_and_keeps_order():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": None})
    # sorted: a 0.01 * 3 = 0.03; c 0.03 * 2 = 0.06; b 0.04 * 1 = 0.04 -> max(0.06, 0.04) = 0.06
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": None})
    assert holm({"only": 0.2}) == {"only": 0.2}
    assert holm({"x": 0.6, "y": 0.7}) == pytest.approx({"x": 1.0, "y": 1.0})


def test_a_bounded_interval_stays_in_range_and_covers_as_the_t_interval_does_at_five_replicates():
    """Exploit shares near 1 against a base near 0 (the positive control's shape): per-replicate
    differences from Beta draws, n = 5. The cut interval never leaves [-1, 1], and it covers the true
    difference exactly as often as the uncut t-interval (cutting to the range never drops the truth)."""
    from hackable_rl.evaluation.replicates import difference_bounds

    rng = np.random.default_rng(5)
    true_a, true_b, runs = 0.9, 0.06, 2000
    covered = covered_cut = 0
    for _ in range(runs):
        a = rng.beta(9 * 4, 1 * 4, size=(5, 1))
        b = rng.beta(0.6 * 4, 9.4 * 4, size=(5, 1))
        plain, cut = replicate_interval(a - b), replicate_interval(a - b, difference_bounds("exploit_share"))
        assert -1.0 <= cut.ci_low <= cut.ci_high <= 1.0 and -1.0 <= cut.ci90_low <= cut.ci90_high <= 1.0
        covered += plain.ci_low <= true_a - true_b <= plain.ci_high
        covered_cut += cut.ci_low <= true_a - true_b <= cut.ci_high
    assert covered_cut == covered and covered / runs >= 0.93
    assert difference_bounds("hacking_gap") == (-2.0, 2.0) and difference_bounds("pass_at_1") == (-1.0, 1.0)


def test_the_sign_test_counts_replicates_above_zero_against_a_fair_coin():
    from hackable_rl.evaluation.replicates import sign_test

    assert sign_test([0.1, 0.2, 0.05, 0.3, 0.01]) == pytest.approx(2 / 32)  # all five above: its smallest p
    assert sign_test([0.1, 0.2, 0.05, 0.3, -0.01]) == pytest.approx(12 / 32)  # one below: 2 * P(X <= 1)
    assert sign_test([0.1, 0.0, 0.2]) == pytest.approx(0.5)  # the zero is dropped: 2 of 2 above
    assert sign_test([0.0, 0.0]) is None


def test_outcomes_carry_the_sign_test_beside_the_t_test(tmp_path):
    import json

    from hackable_rl.report.declared import Outcome, write_outcomes
    from hackable_rl.report.outcomes_table import outcomes_table

    outcome = Outcome("gain", "k1", "a", "b", "pass_at_1", 0.5, 0.4, 0.1, 0.05, 0.15, "a > b", True, 5,
                      (0.1, 0.2, 0.05, 0.3, 0.01), p_value=0.01)
    written = json.loads(write_outcomes(tmp_path / "outcomes.json", [outcome]).read_text())
    assert written[0]["sign_p"] == pytest.approx(0.0625)
    row = next(line for line in outcomes_table([outcome]) if line.startswith("| gain"))
    assert row.rstrip(" |").split(" | ")[-2] == "0.0625"  # the sign test, then the MDE


def test_the_minimum_detectable_effect_is_what_a_t_test_detects_with_80_percent_power() -> None:
    """Simulated: replicates drawn with a true mean at the MDE their spread implies are detected about
    80% of the time by the two-sided t-test at 5%."""
    from scipy import stats

    from hackable_rl.evaluation.replicates import minimum_detectable_effect

    rng = np.random.default_rng(0)
    sd, n = 0.02, 5
    mde = minimum_detectable_effect(tuple(rng.normal(0, sd, 200)[:n]))
    assert mde is not None and minimum_detectable_effect((0.1,)) is None and minimum_detectable_effect((0.0, 0.0)) is None
    effect = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / np.sqrt(n)
    detected = np.mean([stats.ttest_1samp(rng.normal(effect, sd, n), 0.0).pvalue < 0.05 for _ in range(4000)])
    assert 0.70 < detected < 0.90  # the usual approximation: near 80%, not exact at n = 5
