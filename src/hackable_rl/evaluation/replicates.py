"""Intervals across replicates, and Holm's correction within a declared family (docs/metrics.md,
"Comparisons"; ../shared/docs/spec.md, section 7).

A replicate is a whole pipeline seed: its own warm start, training and evaluation. A comparison A - B
takes one paired (prompt-matched) difference per replicate, d_1..d_S, and its interval is the
t-interval over them:

    diff = mean(d)        CI = diff ± t(0.975, S - 1) · sd(d) / sqrt(S)        (sd with S - 1)

so the width carries everything that differs between replicates (warm start, training, sampling),
which a bootstrap over 2-3 seeds understated by (S - 1)/S with no small-sample correction. One
replicate gives no between-replicate interval: None, with the reason, never a narrow one.

The prompt bootstrap within replicates stays as a secondary interval, labelled "conditional on these
models": it says how precisely the test prompts measured *these* trained policies, not how a rerun
would come out. Plain NumPy and SciPy's t distribution; no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

__all__ = ["INTERVAL_METHOD", "CONDITIONAL_METHOD", "ONE_REPLICATE", "ReplicateInterval", "replicate_interval",
           "sign_test", "t_interval", "holm"]

INTERVAL_METHOD = "t-interval over per-replicate paired differences"
CONDITIONAL_METHOD = "prompt bootstrap within replicates (conditional on these models)"
ONE_REPLICATE = "one replicate: no between-replicate interval (a pilot)"


@dataclass(frozen=True)
class ReplicateInterval:
    """A paired difference across replicates with its t-interval and two-sided t-test."""

    diff: float
    """Mean of the per-replicate differences."""
    per_replicate: tuple[float, ...]
    """Each replicate's paired difference (mean over its shared prompts)."""
    sd: float | None
    """Standard deviation of the per-replicate differences (ddof 1); None with one replicate."""
    ci_low: float | None
    ci_high: float | None
    """The 95% t-interval; None with one replicate (`reason` says so)."""
    ci90_low: float | None
    ci90_high: float | None
    """The 90% t-interval: the TOST against a declared margin reads it."""
    p_value: float | None
    """Two-sided one-sample t-test of mean 0; None with one replicate. Holm adjusts it in a family."""
    reason: str | None = None
    """Why there is no interval (None when there is one)."""

    @property
    def n_replicates(self) -> int:
        return len(self.per_replicate)

    @property
    def detected(self) -> bool:
        """The 95% interval exists and excludes 0."""
        return self.ci_low is not None and (self.ci_low > 0 or self.ci_high < 0)


def t_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """mean ± t((1 + confidence) / 2, n - 1) · sd / sqrt(n) of at least two values."""
    n = len(values)
    half = scipy_stats.t.ppf((1 + confidence) / 2, n - 1) * values.std(ddof=1) / np.sqrt(n)
    centre = float(values.mean())
    return centre - float(half), centre + float(half)


def difference_bounds(metric: str) -> tuple[float, float]:
    """The range a paired difference of `metric` can take: a share, rate or accuracy lies in [0, 1], so
    the difference of two in [-1, 1]; a hacking gap (a reward minus a correctness, in [-1, 1]) gives
    differences in [-2, 2]."""
    return (-2.0, 2.0) if "gap" in metric else (-1.0, 1.0)


def level_bounds(metric: str) -> tuple[float, float]:
    """The range one policy's `metric` can take: [0, 1] for a share, rate or accuracy, [-1, 1] for a
    hacking gap."""
    return (-1.0, 1.0) if "gap" in metric else (0.0, 1.0)


def _bounded(low: float, high: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """The interval cut to the range the quantity can take. Its coverage is the t-interval's: the true
    difference lies in the range, so it is inside the cut interval exactly when inside the uncut one
    (tests/test_replicates.py simulates it at n = 5)."""
    return (low, high) if bounds is None else (max(low, bounds[0]), min(high, bounds[1]))


def replicate_interval(differences: np.ndarray, bounds: tuple[float, float] | None = None) -> ReplicateInterval:
    """The interval of an [S, P] matrix of paired differences (S replicates, P shared prompts): one
    difference per replicate (its mean over the prompts), then the t-interval over the S of them, cut
    to `bounds` (`difference_bounds` of the metric) where given."""
    per_replicate = differences.mean(axis=1)  # [S]
    values = tuple(float(value) for value in per_replicate)
    if len(values) < 2:
        return ReplicateInterval(values[0], values, None, None, None, None, None, None, ONE_REPLICATE)
    sd = float(per_replicate.std(ddof=1))
    if sd == 0.0:  # every replicate agrees exactly: the interval is the point, the test is decided
        centre = values[0]
        p_value = 1.0 if centre == 0 else 0.0
        return ReplicateInterval(centre, values, 0.0, centre, centre, centre, centre, p_value)
    low, high = _bounded(*t_interval(per_replicate, 0.95), bounds)
    low90, high90 = _bounded(*t_interval(per_replicate, 0.90), bounds)
    p_value = float(scipy_stats.ttest_1samp(per_replicate, 0.0).pvalue)
    return ReplicateInterval(float(per_replicate.mean()), values, sd, low, high, low90, high90, p_value)


POWER = 0.80
"""The power a minimum detectable effect is stated at."""


def minimum_detectable_effect(per_replicate: tuple[float, ...] | list[float], power: float = POWER,
                              alpha: float = 0.05) -> float | None:
    """The smallest |mean difference| the two-sided one-sample t-test at `alpha` detects with `power`,
    given these replicates' spread: (t_{1-alpha/2, n-1} + t_{power, n-1}) * sd / sqrt(n), the usual
    approximation. What a null could have seen; None below two replicates or where every replicate
    agrees exactly (no spread to scale by)."""
    values = np.asarray(per_replicate, dtype=float)
    if len(values) < 2 or float(values.std(ddof=1)) == 0.0:
        return None
    freedom = len(values) - 1
    multiplier = scipy_stats.t.ppf(1 - alpha / 2, freedom) + scipy_stats.t.ppf(power, freedom)
    return float(multiplier * values.std(ddof=1) / np.sqrt(len(values)))


def sign_test(per_replicate: tuple[float, ...] | list[float]) -> float | None:
    """The two-sided exact sign test of "a replicate's difference is as likely below 0 as above": the
    count of positive differences against Binomial(n, 1/2), zeros dropped; None without a nonzero one.
    It assumes no distribution, so it stands beside the t-test where five replicates cannot show
    normality; its smallest p at 5 replicates is 2 / 32 = 0.0625, so it never detects alone at 5%."""
    signs = [value > 0 for value in per_replicate if value != 0]
    if not signs:
        return None
    return float(scipy_stats.binomtest(sum(signs), len(signs), 0.5).pvalue)


def holm(p_values: Mapping[str, float | None]) -> dict[str, float | None]:
    """Holm's step-down adjusted p-values of one declared family (None stays None and does not count).

    Sorted ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) · p_(j)): a comparison is
    significant at 5% after adjustment exactly when Holm's procedure rejects it.
    """
    defined = sorted((value, name) for name, value in p_values.items() if value is not None)
    m = len(defined)
    adjusted: dict[str, float | None] = {name: None for name, value in p_values.items() if value is None}
    running = 0.0
    for rank, (value, name) in enumerate(defined):
        running = max(running, min(1.0, (m - rank) * value))
        adjusted[name] = running
    return {name: adjusted[name] for name in p_values}
