"""Paired comparisons of policies evaluated on the same prompts (docs/metrics.md, "Comparisons").

Every evaluation saves one `PromptResult` per prompt (`prompts.jsonl`, `evaluation.prompt_results`):
how many of its n samples the judge found correct, whether the greedy completion was correct, and its
mean observed reward and hacking gap. Two policies evaluated on the same prompts are compared prompt by prompt, within each
replicate (a whole pipeline seed: warm start, training and evaluation; A and B of one replicate
share its warm start):

    d_s   = mean over the shared prompts of (metric under A - metric under B), in replicate s
    diff  = mean of d_1..d_S
    CI    = the t-interval over d_1..d_S (`evaluation.replicates`): what a rerun of the whole
            pipeline would give, warm start included; none with one replicate

A B evaluated once (one folder) is paired with every replicate of A. Beside it, the prompt bootstrap
within these replicates (`conditional_ci_low/high`: 2.5th and 97.5th percentiles of the mean over
replicates that resample prompts, a prompt's samples staying together) says how precisely the test
prompts measured these particular models; it is labelled "conditional on these models" wherever it
is shown. Replicates come from a seeded generator: the same inputs give the same numbers.

Equivalence is never read from a CI that covers 0 ("no difference detected" is all that says). Two
policies are called equivalent only against a declared margin m, by two one-sided tests at 5% each
(TOST): the 90% t-interval lies inside (-m, +m) (`equivalence_verdict`). Holm's correction runs over
the declared family (`compare`: the pass@1 comparisons of the declared pairs), and both the raw and
the adjusted p-value are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_json
from hackable_rl.evaluation.prompt_results import PromptResult
from hackable_rl.evaluation.replicates import (
    INTERVAL_METHOD,
    ReplicateInterval,
    difference_bounds,
    holm,
    level_bounds,
    replicate_interval,
)

BOOTSTRAP_REPLICATES = 10_000
CONFIDENCE = 0.95
EQUIVALENCE_CONFIDENCE = 0.90
"""TOST at 5% on each side: both one-sided tests reject exactly when the 90% CI lies inside (-m, +m)."""
VERDICTS = ("equivalent", "different", "no difference detected")
PRIMARY_FAMILY = "pass@1 of the declared pairs"
"""The family `compare` adjusts with Holm: the headline comparisons, not their secondary metrics."""


@dataclass(frozen=True)
class Equivalence:
    """The equivalence test of a paired difference against a declared margin (TOST)."""

    margin: float
    ci90_low: float | None
    ci90_high: float | None
    """The 90% t-interval (None with one replicate: then there is no test)."""
    verdict: str
    """One of VERDICTS (`equivalence_verdict`), or NO_TEST with one replicate."""

    def describe(self) -> str:
        """`equivalent: 90% CI [-0.004, +0.006] inside ±0.020`, or the verdict and why it is not."""
        if self.ci90_low is None:
            return f"{self.verdict} against ±{self.margin:.3f}"
        inside = "inside" if self.verdict == "equivalent" else "not inside"
        return f"{self.verdict}: 90% CI [{self.ci90_low:+.3f}, {self.ci90_high:+.3f}] {inside} ±{self.margin:.3f}"


NO_TEST = "no test (one replicate)"


@dataclass(frozen=True)
class Comparison:
    """A paired difference A - B across replicates with its t-interval (the row of metrics/compare.json)."""

    metric: str
    diff: float
    ci_low: float | None
    ci_high: float | None
    """The 95% t-interval over the per-replicate differences; None with one replicate (`reason`)."""
    n_prompts: int
    """Prompts both policies have a value on in every replicate."""
    n_samples: int
    """Judged samples per policy and replicate, summed over the paired prompts (A's count)."""
    n_replicates: int
    per_replicate: list[float]
    """Each replicate's paired difference."""
    sd: float | None
    """SD of the per-replicate differences (ddof 1)."""
    p_value: float | None
    """Two-sided t-test of a zero mean difference across replicates (raw)."""
    conditional_ci_low: float
    conditional_ci_high: float
    """Secondary: the 95% prompt-bootstrap interval within these replicates, conditional on these models."""
    interval_method: str = INTERVAL_METHOD
    reason: str | None = None
    """Why there is no interval (one replicate)."""
    p_holm: float | None = None
    """The p-value adjusted by Holm within `family` (None: not in a declared family)."""
    family: str | None = None
    """The declared family of primary comparisons Holm ran over."""
    equivalence: Equivalence | None = None
    """The test against `compare --margin` (None: no margin declared)."""

    @property
    def detected(self) -> bool:
        """The 95% interval exists and excludes 0 (raw, before any multiplicity correction)."""
        return self.ci_low is not None and (self.ci_low > 0 or self.ci_high < 0)

    @property
    def detected_after_holm(self) -> bool | None:
        """Holm-adjusted p below 5% (None outside a family)."""
        return None if self.p_holm is None else self.p_holm < 0.05

    def describe(self) -> str:
        """`+0.162 [0.131, 0.193]`, with "no difference detected" when the interval covers 0, the
        reason when there is none, and, with a margin, the equivalence verdict instead."""
        if self.ci_low is None:
            return f"{self.diff:+.3f} ({self.reason})"
        text = f"{self.diff:+.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        if self.p_holm is not None:
            text += f" (p {self.p_value:.3g}, Holm {self.p_holm:.3g})"
        if self.equivalence is not None:
            return f"{text}, {self.equivalence.describe()}"
        return text if self.detected else f"{text}, no difference detected"

    def record(self) -> dict[str, Any]:
        """compare.json's entry: the fields above, with the margin's `ci90_low`, `ci90_high`, `margin`
        and `verdict` only when one was declared."""
        record = {key: value for key, value in asdict(self).items() if key != "equivalence"}
        if self.equivalence is not None:
            record |= asdict(self.equivalence)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Comparison:
        """A compare.json entry read back (with or without a margin's fields)."""
        test = {key: record[key] for key in ("margin", "ci90_low", "ci90_high", "verdict") if key in record}
        rest = {key: value for key, value in record.items() if key not in test}
        return cls(**rest, equivalence=Equivalence(**test) if test else None)

    def summary(self) -> str:
        """`pass_at_1 +0.162 [0.131, 0.193] (500 prompts, 3 replicates)`: the line `compare` prints and
        the report lists."""
        return f"{self.metric} {self.describe()} ({self.n_prompts} prompts, {self.n_replicates} replicate(s))"


# --------------------------------------------------------------------------- the bootstrap


def _prompt_tables(
    evaluations: Sequence[Sequence[PromptResult]], metric: str
) -> tuple[list[dict[str, PromptResult]], list[str]]:
    """Each evaluation by prompt id, and the prompts (in the first's order) every one of them has a
    `metric` value on: the prompts a bootstrap can resample."""
    tables = [{r.prompt_id: r for r in results} for results in evaluations]
    shared = [p for p in tables[0] if all(p in t and t[p].value(metric) is not None for t in tables)]
    return tables, shared


def _difference_matrix(
    a_seeds: Sequence[Sequence[PromptResult]], b_seeds: Sequence[Sequence[PromptResult]], metric: str
) -> tuple[np.ndarray, int]:
    """[S, P] per-seed, per-prompt differences on the prompts every evaluation has a value on, and
    A's judged sample count over those prompts (per seed). B has one evaluation or one per seed."""
    if len(b_seeds) not in (1, len(a_seeds)):
        raise UserError(
            f"compare: {len(a_seeds)} seeds of A against {len(b_seeds)} of B; pair one B with every seed, "
            "or give B the same seeds"
        )
    tables, shared = _prompt_tables((*a_seeds, *b_seeds), metric)
    if not shared:
        raise UserError(f"compare: no prompt has {metric} under both policies; were they evaluated on one split?")
    a_tables, b_tables = tables[: len(a_seeds)], tables[len(a_seeds) :]
    rows = []
    for seed, a in enumerate(a_tables):
        b = b_tables[seed if len(b_tables) > 1 else 0]
        rows.append([a[p].value(metric) - b[p].value(metric) for p in shared])
    n_samples = sum(a_tables[0][p].n for p in shared)
    return np.asarray(rows, dtype=float), n_samples


def bootstrap_means(differences: np.ndarray, replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0) -> np.ndarray:
    """[B] bootstrap means of an [S, P] matrix of paired differences that resample the P prompts with
    replacement and keep the S replicates (the secondary interval, conditional on these models)."""
    n_prompts = differences.shape[1]
    rng = np.random.default_rng(seed)
    prompt_draws = rng.integers(0, n_prompts, size=(replicates, n_prompts))  # [B, P]
    return differences[:, prompt_draws].mean(axis=2).mean(axis=0)  # [S, B] -> [B]


def percentile_ci(means: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central `confidence` interval of bootstrap means (percentile bootstrap)."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def conditional_ci(differences: np.ndarray, replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0) -> tuple[float, float]:
    """The 95% prompt-bootstrap interval of an [S, P] difference matrix, conditional on these models."""
    return percentile_ci(bootstrap_means(differences, replicates, seed))


# --------------------------------------------------------------------------- equivalence (TOST)


def check_margin(margin: float, where: str) -> float:
    """A declared equivalence margin: a number > 0 in the metric's own units (0.02: two points of pass@1)."""
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 < margin < 1:
        raise UserError(f"{where}: equivalence margin {margin!r}: expected a number in (0, 1), e.g. 0.02")
    return float(margin)


def equivalence_verdict(ci95: tuple[float, float], ci90: tuple[float, float], margin: float) -> str:
    """TOST against (-margin, +margin): "equivalent" when the 90% CI lies inside it (a detected
    difference smaller than the declared margin included: the margin says it does not matter);
    otherwise "different" when the 95% CI excludes 0, else "no difference detected"."""
    if -margin < ci90[0] and ci90[1] < margin:
        return "equivalent"
    if ci95[0] > 0 or ci95[1] < 0:
        return "different"
    return "no difference detected"


def equivalence_test(differences: np.ndarray, margin: float) -> Equivalence:
    """The TOST of an [S, P] matrix of paired differences on the t-intervals across its replicates;
    with one replicate there is no test (NO_TEST), never one read off the prompt bootstrap."""
    return equivalence_of(replicate_interval(differences), margin)


def equivalence_of(interval: ReplicateInterval, margin: float) -> Equivalence:
    """The TOST of an interval already computed across replicates (NO_TEST with one replicate)."""
    if interval.ci_low is None:
        return Equivalence(margin, None, None, NO_TEST)
    ci90 = (interval.ci90_low, interval.ci90_high)
    return Equivalence(margin, *ci90, equivalence_verdict((interval.ci_low, interval.ci_high), ci90, margin))


def compare_matrix(metric: str, differences: np.ndarray, n_samples: int, margin: float | None = None,
                   seed: int = 0, bounds: tuple[float, float] | None = None) -> Comparison:
    """The comparison of an [S, P] matrix of paired differences: the t-interval across its S
    replicates, the conditional prompt bootstrap beside it and, with a `margin`, the TOST."""
    interval = replicate_interval(differences, bounds or difference_bounds(metric))
    equivalence = None if margin is None else equivalence_of(interval, margin)
    return Comparison(
        metric, interval.diff, interval.ci_low, interval.ci_high, differences.shape[1], n_samples,
        interval.n_replicates, list(interval.per_replicate), interval.sd, interval.p_value,
        *conditional_ci(differences, seed=seed), reason=interval.reason, equivalence=equivalence,
    )


def policy_mean_ci(seeds: Sequence[Sequence[PromptResult]], metric: str = "pass_at_1", seed: int = 0) -> Comparison:
    """One policy's `metric` (mean over its replicates and prompts) with the same t-interval across
    replicates: the whisker of a bar, not a comparison (compare two policies with `compare`)."""
    tables, shared = _prompt_tables(seeds, metric)
    if not shared:
        raise UserError(f"no prompt has {metric} in every replicate's evaluation")
    values = np.asarray([[t[p].value(metric) for p in shared] for t in tables], dtype=float)
    return compare_matrix(metric, values, sum(tables[0][p].n for p in shared), seed=seed, bounds=level_bounds(metric))


def compare(
    a_seeds: Sequence[Sequence[PromptResult]],
    b_seeds: Sequence[Sequence[PromptResult]],
    metric: str = "pass_at_1",
    seed: int = 0,
    margin: float | None = None,
) -> Comparison:
    """A - B on `metric`, paired by prompt and by replicate (a B evaluated once is paired with every
    replicate of A); with a `margin`, its equivalence test too."""
    differences, n_samples = _difference_matrix(a_seeds, b_seeds, metric)
    return compare_matrix(metric, differences, n_samples, margin, seed)


def with_holm(comparisons: Mapping[str, Comparison], family: Sequence[str], label: str) -> dict[str, Comparison]:
    """The comparisons with Holm-adjusted p-values over the named `family` (the others unchanged)."""
    adjusted = holm({name: comparisons[name].p_value for name in family})
    return {name: replace(comparison, p_holm=adjusted[name], family=label) if name in adjusted else comparison
            for name, comparison in comparisons.items()}


MACHINE_KEY = "machine"
"""compare.json's one entry that is not a comparison."""

MACHINE_NOT_RECORDED = ("machine not recorded: computed from its inputs' prompts.jsonl without a model, so every "
                        "machine writes the same bytes (what a fresh clone's check compares); each input's eval.json "
                        "names the machine that made it")


def write_comparisons(path: Path, comparisons: Mapping[str, Comparison]) -> Path:
    """metrics/compare.json: one entry per named comparison (`clean_vs_base`: {metric, diff, ...}) and
    `machine`, which says why it names none (`MACHINE_NOT_RECORDED`)."""
    write_json(path, {**{name: comparison.record() for name, comparison in comparisons.items()},
                      MACHINE_KEY: MACHINE_NOT_RECORDED})
    return path


def comparison_records(document: Mapping[str, Any]) -> dict[str, Any]:
    """compare.json's comparisons by name (its `machine` note left out)."""
    return {name: entry for name, entry in document.items() if name != MACHINE_KEY}
