"""A study's declared outcomes: each one once, A - B paired by prompt and seed, with its target and
whether it is met, as `metrics/outcomes.json` entries and one markdown table.

Both cell studies (the blind spots, the J sweep) write this schema: `name`, `cell`, `a`, `b`,
`metric`, `mean_a`, `mean_b`, `diff`, `ci_low`, `ci_high`, `target`, `met` (null where undefined:
a missing condition, no shared prompt), then `n_replicates`, `per_replicate`, `interval_method`,
`p_value`, `p_holm` and `met_after_holm`.

The declared outcomes of a study are its family: Holm's correction runs over every outcome whose
target asks for a detected difference (an equivalence target is judged by its own TOST instead), and
`met_after_holm` is `met` with the difference still detected at 5% after the adjustment (null on a
secondary row: it is not adjusted, so it has no verdict after Holm). Both the raw and the adjusted
verdicts are reported; headlines use the adjusted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hackable_rl.config.study import load_study, study_file_beside
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json, write_json
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE
from hackable_rl.evaluation.replicates import INTERVAL_METHOD, holm, minimum_detectable_effect, sign_test
from hackable_rl.report.conditions import ONE_WARM_START
from hackable_rl.report.outcomes import Paired, paired, policy_value
from hackable_rl.study.arms import affine_twins
from hackable_rl.study.records import CONDITION_FILE, condition_folder, read_condition

__all__ = ["CellKey", "CellStudyReport", "MetRule", "Outcome", "declared_family", "in_declared_family", "labelled", "load_cell_conditions", "with_affine_twins", "paired_outcome", "write_outcomes"]

STUDY_INTERVAL = f"{INTERVAL_METHOD} (training seeds of one warm start)"
"""The interval method of a study whose seeds share one warm start (`labelled` says otherwise)."""
OWN_WARM_START_INTERVAL = f"{INTERVAL_METHOD} (replicates, each with its own warm start)"
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
    secondary: bool = False
    """Outside the study's declared Holm family (study.yaml `family`): its raw verdict only."""
    affine: bool = False
    """A's optimised reward is a positive affine map of B's in this cell (`MethodSpec.affine_to`): the
    two train alike under Adam, so the comparison is listed but never tested."""
    affine_after_data: bool = False
    """`affine`, and the study file records taking affine twins out of Holm as a deviation made after
    its data (`deviations`): the declared family keeps this comparison, and the amended family (without
    it) stands beside, labelled."""
    p_holm_amended: float | None = None
    """Holm's p in the amended family (a study with an after-data deviation only; None outside it)."""
    met_after_holm_amended: bool | None = None
    """The verdict after Holm in the amended family (as `p_holm_amended`)."""
    equivalence: str | None = None
    """The equivalence test (TOST) against the study's margin, where the outcome declares one: `equivalent:
    90% CI [...] inside ±m`, or why not (outcomes.json carries the key only then)."""

    @property
    def sign_p(self) -> float | None:
        """The sign test over the replicates' differences (`evaluation.replicates.sign_test`), beside
        the t-test; None with fewer than two replicates."""
        return sign_test(self.per_replicate) if len(self.per_replicate) > 1 else None

    @property
    def mde(self) -> float | None:
        """The minimum detectable effect at 80% power from these replicates' spread
        (`evaluation.replicates.minimum_detectable_effect`): beside a null, the size it could have seen."""
        return minimum_detectable_effect(self.per_replicate) if self.diff is not None else None

    @property
    def identical(self) -> bool:
        """A and B trained alike by construction: every per-seed difference exactly 0, or A's reward an
        affine map of B's (`affine`) where the study declared that before its data. Listed, never tested."""
        untested_twin = self.affine and not self.affine_after_data
        return untested_twin or (bool(self.per_replicate) and all(value == 0 for value in self.per_replicate))

    @property
    def in_family(self) -> bool:
        """Adjusted with the others in the declared family: a target that asks for a detected difference
        (not equivalence), between arms that are not identical."""
        return (self.p_value is not None and not self.target.startswith("equivalent") and not self.identical
                and not self.secondary)

    @property
    def in_amended_family(self) -> bool:
        """In the family an after-data deviation leaves: the declared one without the affine twins."""
        return self.in_family and not self.affine

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
        folder = condition_folder(path, data)
        if condition.get("cell") is None or data["status"] != "ok" or not (folder / PROMPTS_FILE).exists():
            continue
        cells.setdefault((condition["cell"], condition["method"]), {})[int(condition["seed"])] = folder
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
    equivalence = result.equivalence.describe() if result.equivalence is not None else None
    return Outcome(name, cell, a_label, b_label, metric, mean_a, mean_b, result.diff, result.ci_low, result.ci_high,
                   target, bool(met_rule(mean_a, mean_b, result)), result.seeds, result.per_seed,
                   p_value=result.p_value, equivalence=equivalence), result


TRANSFER = "pass_at_1_transfer"
"""pass@1 under the transferred judge (docs/metrics.md): reported beside every pass@1 row, secondary."""


def both_judges(name: str, cell: str, a_label: str, b_label: str, a: Mapping[int, Path], b: Mapping[int, Path],
                target: str, met_rule: MetRule, margin: float | None = None) -> tuple[list[Outcome], Paired | None]:
    """A pass@1 outcome under the strict judge and the same comparison under the transferred judge
    (secondary: outside the Holm family, so the judges' agreement is shown, not tested twice), with
    the strict comparison."""
    strict, result = paired_outcome(name, cell, a_label, b_label, a, b, "pass_at_1", target, met_rule, margin)
    transferred, _ = paired_outcome(name, cell, a_label, b_label, a, b, TRANSFER, target, met_rule, margin)
    return [strict, replace(transferred, secondary=True)], result


def judge_dependent(outcomes: list[Outcome]) -> list[str]:
    """`<name> in <cell>, A vs B` for each pass@1 outcome whose verdict differs between the judges."""
    transferred = {(o.name, o.cell, o.a, o.b): o.met for o in outcomes if o.metric == TRANSFER}
    return [f"{o.name} in {o.cell}, {o.a} vs {o.b}" for o in outcomes if o.metric == "pass_at_1"
            and (o.name, o.cell, o.a, o.b) in transferred and transferred[(o.name, o.cell, o.a, o.b)] != o.met]


def judges_note(outcomes: list[Outcome]) -> str:
    """The line under an outcomes table that says whether any verdict depends on the judge."""
    dependent = judge_dependent(outcomes)
    return (f"Every pass@1 row stands beside the same comparison under the transferred judge (`{TRANSFER}`, "
            "secondary). " + (f"The verdict depends on the judge in: {'; '.join(dependent)}." if dependent
                              else "No verdict depends on the judge."))


def declared_family(study_file: Path) -> list[str] | None:
    """The study file's declared Holm family (`family`), None where the file does not declare one (then
    every declared outcome is in it)."""
    family = tuple(load_study(study_file).family) if study_file.exists() else ()
    return list(family) or None


def labelled(outcomes: list[Outcome], interval: str) -> list[Outcome]:
    """The outcomes with the interval method their study used (`report.conditions.interval_label`)."""
    method = STUDY_INTERVAL if interval == ONE_WARM_START else OWN_WARM_START_INTERVAL
    return [replace(o, interval_method=method) for o in outcomes]


def in_declared_family(outcomes: list[Outcome], family: list[str] | None) -> list[Outcome]:
    """The outcomes, those whose name is outside the declared `family` marked secondary."""
    if family is None:
        return outcomes
    return [o if o.name in family else replace(o, secondary=True) for o in outcomes]


def with_affine_twins(outcomes: list[Outcome], study_dir: Path) -> list[Outcome]:
    """The outcomes, those comparing an arm with its affine twin in a cell marked `affine` (either way
    round): twins its method declares (`study.arms.affine_twins`, built from the study file and
    the params.yaml beside the results folder) and twins the payoff stage found on the priced rewards
    (`affine_arms.json` in the results folder, `payoff.identities.affine_arms`), where each exists.
    Where the study file records the rule as a deviation made after its data (`deviations`), the twins
    are also marked `affine_after_data`: tested in the declared family, dropped only in the amended one."""
    study_file = study_file_beside(study_dir)
    params = study_file.with_name("params.yaml")
    twins: set[tuple[str, str, str]] = set()
    after_data = False
    if params.is_file() and study_file.is_file():
        twins = affine_twins(study_file, params)
        after_data = AFFINE_DEVIATION in {d.change for d in load_study(study_file).deviations}
    found = Path(study_dir) / "affine_arms.json"
    if found.is_file():
        twins |= _found_twins(found)
    pairs = twins | {(cell, twin, method) for cell, method, twin in twins}
    return [replace(o, affine=True, affine_after_data=after_data) if (o.cell, o.a, o.b) in pairs else o
            for o in outcomes]


AFFINE_DEVIATION = "affine_twins_out_of_holm"
"""The deviation (study.yaml `deviations[].change`) that took affine twins out of Holm after the data."""


def _found_twins(path: Path) -> set[tuple[str, str, str]]:
    """(cell, method, twin) of each same-cell entry of the payoff stage's affine_arms.json."""
    try:
        return {(entry["cell"], entry["method"], entry["same_as"]["method"]) for entry in read_json(path)
                if entry["same_as"]["cell"] == entry["cell"]}
    except (KeyError, TypeError):
        raise UserError(f"{path}: expected a list of {{cell, method, same_as: {{cell, method}}}} entries "
                        "(`hackable-rl payoff --affine-out` writes it); rerun the payoff stage") from None


def _holm_in(outcomes: list[Outcome], member: Callable[[Outcome], bool]) -> list[tuple[float | None, bool | None]]:
    """(Holm's p, the verdict after Holm) of each outcome within the family `member` picks."""
    tested = {o.comparison: o.p_value for o in outcomes if member(o)}  # a comparison restated counts once
    adjusted = holm(tested)
    return [(adjusted[o.comparison], None if o.met is None else o.met and adjusted[o.comparison] < 0.05)
            if member(o) else (None, None if o.identical or o.secondary else o.met)
            for o in outcomes]  # a secondary row is not adjusted: it has no verdict after Holm to copy


def with_holm(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes with Holm-adjusted p-values over the study's declared family (`Outcome.in_family`)
    and, where an after-data deviation applies, over the amended family beside (`in_amended_family`)."""
    declared = [replace(o, p_holm=p, met_after_holm=met)
                for o, (p, met) in zip(outcomes, _holm_in(outcomes, lambda o: o.in_family), strict=True)]
    if not has_deviation(outcomes):
        return declared
    amended = _holm_in(outcomes, lambda o: o.in_amended_family)
    return [replace(o, p_holm_amended=p, met_after_holm_amended=met if not o.affine else None)
            for o, (p, met) in zip(declared, amended, strict=True)]


def has_deviation(outcomes: list[Outcome]) -> bool:
    """Whether an after-data deviation (affine twins out of Holm) applies to these outcomes."""
    return any(o.affine_after_data for o in outcomes)


def write_outcomes(path: Path, outcomes: list[Outcome]) -> Path:
    deviation = has_deviation(outcomes)
    return write_json(path, [_written(outcome, deviation) for outcome in with_holm(outcomes)])


_DEVIATION_FIELDS = ("affine_after_data", "p_holm_amended", "met_after_holm_amended")


def _written(outcome: Outcome, deviation: bool) -> dict:
    """An outcome as outcomes.json holds it: its fields and the sign test; `equivalence` only where tested,
    the amended family's fields only in a study with an after-data deviation."""
    fields = asdict(outcome) | {"sign_p": outcome.sign_p, "mde": outcome.mde}
    if fields["equivalence"] is None:
        del fields["equivalence"]
    for name in () if deviation else _DEVIATION_FIELDS:
        del fields[name]
    return fields


