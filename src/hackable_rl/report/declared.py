"""A study's declared outcomes: each one once, A - B paired by prompt and seed, with its target and
whether it is met, as `metrics/outcomes.json` entries and one markdown table.

Both cell studies (the blind spots, the J sweep) write this schema: `name`, `cell`, `a`, `b`,
`metric`, `mean_a`, `mean_b`, `diff`, `ci_low`, `ci_high`, `target`, `met` (null where undefined:
a missing condition, no shared prompt), then `n_replicates`, `per_replicate`, `interval_method`,
`p_value`, `p_holm` and `met_after_holm`.

The declared outcomes of a study are its family: Holm's correction runs over every outcome whose
target asks for a detected difference (an equivalence target is judged by its own TOST instead), and
`met_after_holm` is `met` with the difference still detected at 5% after the adjustment. Both the
raw and the adjusted verdicts are reported; headlines use the adjusted one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hackable_rl.core.jsonl import write_json
from hackable_rl.evaluation.paired import PROMPTS_FILE
from hackable_rl.evaluation.replicates import INTERVAL_METHOD, holm
from hackable_rl.report.outcomes import Paired, paired, policy_value
from hackable_rl.study_records.condition_files import CONDITION_FILE, read_condition

__all__ = ["CellKey", "CellStudyReport", "MetRule", "Outcome", "load_cell_conditions", "paired_outcome", "write_outcomes", "outcomes_table", "fmt"]

STUDY_INTERVAL = f"{INTERVAL_METHOD} (training seeds of one warm start)"
CellKey = tuple[str, str]
"""(cell, method) of a condition."""


@dataclass(frozen=True)
class Outcome:
    """One declared outcome: A - B on `metric` in `cell`, its paired 95% CI, its target and whether
    it is met (None where undefined: a missing condition, no shared prompt)."""

    name: str
    cell: str
    a: str
    b: str
    metric: str
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    target: str
    met: bool | None
    n_replicates: int | None = None
    per_replicate: tuple[float, ...] = ()
    interval_method: str = STUDY_INTERVAL
    p_value: float | None = None
    p_holm: float | None = None
    met_after_holm: bool | None = None

    @property
    def identical(self) -> bool:
        """A and B trained alike in every seed (every per-seed difference exactly 0): an identity by
        construction, listed but never tested."""
        return bool(self.per_replicate) and all(value == 0 for value in self.per_replicate)

    @property
    def in_family(self) -> bool:
        """Adjusted with the others: a target that asks for a detected difference (not equivalence),
        between arms that are not identical."""
        return self.p_value is not None and not self.target.startswith("equivalent") and not self.identical

    @property
    def comparison(self) -> tuple[str, str, str, str]:
        """What is compared: two outcomes with the same cell, arms and metric are one test."""
        return self.cell, self.a, self.b, self.metric

    @property
    def ci_text(self) -> str:
        """`-0.013 [-0.025, -0.002]`, or `-` where undefined."""
        if self.diff is None:
            return "-"
        if self.ci_low is None:
            return f"{self.diff:+.3f} (one seed: no interval)"
        return f"{self.diff:+.3f} [{self.ci_low:+.3f}, {self.ci_high:+.3f}]"


@dataclass(frozen=True)
class CellStudyReport:
    """What a cell study's report wrote, and how many conditions it read (failed ones included)."""

    report: Path
    summary_csv: Path
    summary_json: Path
    outcomes: Path | None
    conditions: int
    failed: int


def load_cell_conditions(study_dir: Path) -> dict[CellKey, dict[int, Path]]:
    """Each (cell, method)'s ok condition folders by seed (those with a prompts.jsonl)."""
    cells: dict[CellKey, dict[int, Path]] = {}
    for path in sorted(Path(study_dir).rglob(CONDITION_FILE)):
        data = read_condition(path)
        condition = data["condition"]
        if condition.get("cell") is None or data["status"] != "ok" or not (path.parent / PROMPTS_FILE).exists():
            continue
        cells.setdefault((condition["cell"], condition["method"]), {})[int(condition["seed"])] = path.parent
    return cells


MetRule = Callable[[float, float, Paired], bool]


def paired_outcome(name: str, cell: str, a_label: str, b_label: str, a: Mapping[int, Path], b: Mapping[int, Path],
                   metric: str, target: str, met_rule: MetRule, margin: float | None = None) -> tuple[Outcome, Paired | None]:
    """The outcome and its paired comparison (with the equivalence test when a `margin` is given);
    `met_rule(mean_a, mean_b, paired)` decides `met` when everything is defined."""
    result = paired(a, b, metric, margin) if a and b else None
    mean_a = policy_value(a, metric) if a else None
    mean_b = policy_value(b, metric) if b else None
    if result is None or mean_a is None or mean_b is None:
        return Outcome(name, cell, a_label, b_label, metric, mean_a, mean_b, None, None, None, target, None), None
    return Outcome(name, cell, a_label, b_label, metric, mean_a, mean_b, result.diff, result.ci_low, result.ci_high,
                   target, bool(met_rule(mean_a, mean_b, result)), result.seeds, result.per_seed,
                   p_value=result.p_value), result


def with_holm(outcomes: list[Outcome], family: Collection[str] = ()) -> list[Outcome]:
    """The outcomes with Holm-adjusted p-values over the study's family (`Outcome.in_family`; with a
    declared `family` of outcome names, only those: the others are secondary, reported unadjusted)."""
    members = [o for o in outcomes if o.in_family and (not family or o.name in family)]
    tested = {o.comparison: o.p_value for o in members}  # a comparison restated counts once
    adjusted = holm(tested)
    return [replace(o, p_holm=adjusted[o.comparison], met_after_holm=None if o.met is None
                    else o.met and adjusted[o.comparison] < 0.05)
            if o in members else replace(o, met_after_holm=None if o.identical else o.met) for o in outcomes]


def write_outcomes(path: Path, outcomes: list[Outcome], family: Collection[str] = ()) -> Path:
    return write_json(path, [asdict(outcome) for outcome in with_holm(outcomes, family)])


def fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _verdict(outcome: Outcome) -> str:
    if outcome.identical:
        return "identical by construction (not tested)"
    return {True: "met", False: "not met", None: "undefined"}[outcome.met]


def outcomes_table(outcomes: list[Outcome], family: Collection[str] = ()) -> list[str]:
    """The outcomes as one markdown table, each outcome once (Holm over `family` when declared)."""
    lines = ["## Declared outcomes (paired by prompt and seed; 95% t-intervals across training seeds, conditional on the study's one warm start)", "",
             "| outcome | cell | A | B | metric | A | B | A - B [95% CI] | target | verdict | p | p (Holm) | "
             "verdict after Holm |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in with_holm(outcomes, family):
        after = _verdict(o) if o.identical else {True: "met", False: "not met", None: "undefined"}[o.met_after_holm]
        lines.append(f"| {o.name} | {o.cell} | {o.a} | {o.b} | {o.metric} | {fmt(o.mean_a)} | {fmt(o.mean_b)} | "
                     f"{o.ci_text} | {o.target} | {_verdict(o)} | {_p(o.p_value)} | {_p(o.p_holm)} | {after} |")
    identical = sorted({f"{o.a} and {o.b} in {o.cell}" for o in outcomes if o.identical})
    scope = (f"The family is the study file's `family` ({', '.join(family)}): Holm's correction adjusts the p-values "
             "of its distinct comparisons whose target asks for a detected difference; the other outcomes are "
             "secondary, their verdicts unadjusted" if family else
             "The declared outcomes are the family: Holm's correction adjusts the p-values of every distinct "
             "comparison whose target asks for a detected difference")
    return lines + ["", f"{scope} (equivalence targets are judged by their TOST; a comparison declared twice counts once).",
                    *(["", f"Identical by construction (every seed's difference exactly 0; listed, never tested): "
                        f"{'; '.join(identical)}."] if identical else [])]


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
