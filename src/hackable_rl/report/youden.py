"""The J sweep's report: the learning gain against Youden's J, the equal-J pairs tested against each
other, and each declared prediction's verdict (supported, refuted, not distinguishable).

A J sweep's study file declares noise cells (`study.cells.NoiseCell`: each member pays a wrong
answer with probability fpr and denies a right one with fnr, so J = 1 - fpr - fnr), the clean
reference as a cell of its own, the random-reward control's cell and the equal-J pairs. A cell's
learning gain is the reference method's test pass@1 there minus base's, paired by prompt and seed; two cells
are compared by their pass@1 difference, paired the same way (base cancels). Every outcome is
written once to `metrics/outcomes.json` (`report.declared`).

The hacking gap is not reported: under random noise it is fpr - (fpr + fnr) * accuracy whatever the
policy learnt, a restatement of pass@1 (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from hackable_rl.config.study import load_study, study_file_beside
from hackable_rl.core.errors import UserError
from hackable_rl.extensions import reference_method
from hackable_rl.report.conditions import interval_label, machines_line, study_table
from hackable_rl.report.declared import (
    TRANSFER,
    CellKey,
    CellStudyReport,
    MetRule,
    Outcome,
    both_judges,
    declared_family,
    in_declared_family,
    judges_note,
    labelled,
    load_cell_conditions,
    with_affine_twins,
    with_holm,
    write_outcomes,
)
from hackable_rl.report.outcomes import Paired, paired
from hackable_rl.report.outcomes_table import fmt, outcomes_table
from hackable_rl.study.cells import NoiseCell, noise_cells
from hackable_rl.study.records import write_summary

__all__ = ["SweepDesign", "read_design", "SweepOutcomes", "sweep_outcomes", "prediction_verdicts", "build_j_sweep_report"]

BASE = "base"
PASS = "pass_at_1"
SUPPORTED, REFUTED, UNDECIDED = "supported", "refuted", "not distinguishable"
NO_GAIN = "no gain"


@dataclass(frozen=True)
class SweepDesign:
    """What the study file declares: its cells (the reference first), which is which, and the margin."""

    cells: dict[str, NoiseCell]
    reference: str
    random_control: str | None
    equal_j: tuple[tuple[str, str], ...]
    margin: float | None


def read_design(study_file: Path) -> SweepDesign:
    study = load_study(study_file)
    cells = {cell.name: cell for cell in noise_cells(study_file)}
    reference = study.reference.cell if study.reference else None
    if reference not in cells:
        raise UserError(f"{study_file}: a J sweep needs `reference: {{cell: clean, fpr: 0, fnr: 0}}`")
    pairs = []
    for index, pair in enumerate(study.equal_j):
        if not all(name in cells for name in pair):
            raise UserError(f"{study_file}: equal_j[{index}] must name two of its cells, got {list(pair)!r}")
        first, second = (cells[name] for name in pair)
        if first.youden != second.youden:
            raise UserError(f"{study_file}: equal_j[{index}]: {first.name} has J {first.youden:g}, "
                            f"{second.name} {second.youden:g}; an equal-J pair needs one J")
        pairs.append((first.name, second.name))
    control = study.random_control
    if control is not None and control not in cells:
        raise UserError(f"{study_file}: random_control {control!r} is not one of its cells")
    return SweepDesign(cells, reference, control, tuple(pairs), study.equivalence_margin)


# --------------------------------------------------------------------------- outcomes


def _gain_target(cell: NoiseCell, margin: float | None) -> tuple[str, MetRule]:
    """What each J predicts for the gain over base (study.yaml, outcome 3)."""
    if cell.youden > 0:
        return "gain above 0 (ci_low > 0)", lambda a, b, p: p.above_zero
    if cell.youden == 0:
        bound = margin or 0.0
        return f"{NO_GAIN} (ci_high <= {bound:g}; p: one-sided, gain < {bound:g})", lambda a, b, p: p.ci_high <= bound
    return "below base (ci_high < 0)", lambda a, b, p: p.below_zero


@dataclass(frozen=True)
class SweepOutcomes:
    outcomes: list[Outcome]
    """Every declared outcome once, in the study file's order."""
    pairs: dict[str, Paired | None]
    """Each equal-J pair's comparison, by `<first> vs <second>`."""
    precision: Paired | None
    """The precision prediction's comparison: more false positives minus more false negatives."""


def sweep_outcomes(cells: Mapping[CellKey, dict[int, Path]], design: SweepDesign) -> SweepOutcomes:
    """Every declared outcome once, with the paired comparisons the predictions' verdicts read."""
    base = cells.get((design.reference, BASE), {})
    outcomes: list[Outcome] = []
    pairs: dict[str, Paired | None] = {}
    reference = reference_method()
    precision = None
    margin = design.margin
    for first, second in design.equal_j:
        label = f"{first} vs {second}"
        target = f"equivalent within ±{margin:g} (90% CI inside)" if margin else "equivalent (no margin declared)"
        judged, result = both_judges(
            "equal_j_equal_gain", label, f"{reference}@{first}", f"{reference}@{second}", cells.get((first, reference), {}),
            cells.get((second, reference), {}), target,
            lambda a, b, p: p.equivalence is not None and p.equivalence.verdict == "equivalent", margin)
        outcomes += judged
        pairs[label] = result
    fp_heavy, fn_heavy = _balance_pair(design)
    if fp_heavy and fn_heavy:
        judged, precision = both_judges(
            "precision_matters_more", f"{fp_heavy} vs {fn_heavy}", f"{reference}@{fp_heavy}", f"{reference}@{fn_heavy}",
            cells.get((fp_heavy, reference), {}), cells.get((fn_heavy, reference), {}),
            "false positives hurt more: ci_high < 0", lambda a, b, p: p.below_zero, margin)
        outcomes += judged
    for name, cell in design.cells.items():
        target, rule = _gain_target(cell, margin)
        judged = both_judges("learning_gain", name, reference, BASE, cells.get((name, reference), {}), base,
                             target, rule)[0]
        outcomes += [_tested_against(o, margin or 0.0) if cell.youden == 0 else o for o in judged]
    for name in design.cells:
        for method in _treatments(cells, reference):
            if (name, method) in cells:
                outcomes += both_judges(f"{method}_vs_{reference}", name, method, reference, cells[(name, method)],
                                        cells.get((name, reference), {}), f"above {reference} (ci_low > 0)",
                                        lambda a, b, p: p.above_zero)[0]
    return SweepOutcomes(outcomes, pairs, precision)


def _tested_against(outcome: Outcome, bound: float) -> Outcome:
    """The J = 0 outcome with the p-value of its own claim, "no gain": the one-sided t-test over the
    replicates of gain >= bound against gain < bound, the test its target's ci_high <= bound makes.
    (The test against 0 asks whether the cell differs from base, which "no gain" does not claim:
    a loss would count against it under Holm.)"""
    if len(outcome.per_replicate) < 2:
        return outcome
    values = np.asarray(outcome.per_replicate, dtype=float)
    if values.std(ddof=1) == 0.0:
        return replace(outcome, p_value=0.0 if values[0] < bound else 1.0)
    return replace(outcome, p_value=float(scipy_stats.ttest_1samp(values, bound, alternative="less").pvalue))


def _balance_pair(design: SweepDesign) -> tuple[str | None, str | None]:
    """The first equal-J pair of asymmetric cells, ordered (more false positives, more false negatives)."""
    for first, second in design.equal_j:
        a, b = design.cells[first], design.cells[second]
        if a.fpr != a.fnr and b.fpr != b.fnr:
            return (first, second) if a.fpr > b.fpr else (second, first)
    return None, None


def _pair_verdict(result: Paired | None) -> str:
    """The equivalence test's verdict against the declared margin (`equivalence_verdict`: equivalent,
    different, no difference detected); without a margin, different or no difference detected."""
    if result is None:
        return "undefined"
    if result.equivalence is not None:
        return result.equivalence.verdict
    return "different" if result.detected else "no difference detected"


def prediction_verdicts(results: SweepOutcomes) -> dict[str, tuple[str, str]]:
    """Each prediction's verdict and the one line that says why (study.yaml's rules), after Holm: a
    difference that a comparison in the declared family detects raw but not after the correction
    counts as not detected."""
    verdicts: dict[str, tuple[str, str]] = {}
    by_pair = {label: _after_holm(_pair_verdict(result), _family_test(results, label))
               for label, result in results.pairs.items()}
    if by_pair:
        why = "; ".join(f"{label}: {verdict}" for label, verdict in by_pair.items())
        if "undefined" in by_pair.values():
            verdicts["equal_j_equal_gain"] = ("undefined", why)
        elif "different" in by_pair.values():
            verdicts["equal_j_equal_gain"] = (REFUTED, why)
        elif all(v == "equivalent" for v in by_pair.values()):
            verdicts["equal_j_equal_gain"] = (SUPPORTED, why)
        else:
            verdicts["equal_j_equal_gain"] = (UNDECIDED, why)
    precision = next((o for o in results.outcomes if o.name == "precision_matters_more" and o.metric == PASS), None)
    if precision is not None:
        verdict = _pair_verdict(results.precision)
        if precision.diff is None or precision.ci_low is None:
            verdicts["precision_matters_more"] = ("undefined", "a cell of the pair is missing, or has one seed")
        elif precision.ci_high < 0 and precision.met_after_holm is False:
            verdicts["precision_matters_more"] = (
                UNDECIDED, f"{precision.ci_text} lies below 0 (raw p {precision.p_value:.3g}), but not after Holm's "
                           f"correction (p {precision.p_holm:.3g})")
        elif precision.ci_high < 0:
            verdicts["precision_matters_more"] = (SUPPORTED, f"{precision.ci_text} lies below 0")
        elif precision.ci_low > 0 or verdict == "equivalent":
            verdicts["precision_matters_more"] = (REFUTED, f"{precision.ci_text}: {verdict}")
        else:
            verdicts["precision_matters_more"] = (UNDECIDED, f"{precision.ci_text} covers 0, not inside the margin")
    return verdicts


def _family_test(results: SweepOutcomes, label: str) -> Outcome | None:
    """The Holm-adjusted outcome, if any, that tests the same pair of cells as the equal-J pair `label`."""
    return next((o for o in results.outcomes if o.cell == label and o.metric == PASS and o.p_holm is not None), None)


def _after_holm(verdict: str, tested: Outcome | None) -> str:
    """`different` stays different only where the family's test of the same pair survives Holm."""
    if verdict != "different" or tested is None or tested.p_holm < 0.05:
        return verdict
    return f"no difference detected after Holm (raw p {tested.p_value:.3g}, Holm p {tested.p_holm:.3g})"


# --------------------------------------------------------------------------- the report


def build_j_sweep_report(study_dir: Path, out_dir: Path, title: str, outcomes_path: Path | None) -> CellStudyReport:
    """summary.csv/json, gain_vs_j.png, report.md and (given a path) outcomes.json."""
    # deferred: matplotlib loads only where a figure is drawn
    from hackable_rl.report.plots import gain_vs_j_plot

    design = read_design(study_file_beside(study_dir))
    table = study_table(study_dir)
    summary_csv, summary_json = write_summary(table, out_dir)
    cells = load_cell_conditions(study_dir)
    results = sweep_outcomes(cells, design)
    family = declared_family(study_file_beside(study_dir))
    outcomes = with_affine_twins(in_declared_family(results.outcomes, family), study_dir)
    results = replace(results, outcomes=labelled(outcomes, interval_label(study_dir)))
    written = write_outcomes(outcomes_path, results.outcomes) if outcomes_path else None
    gains = _gains(cells, design)
    plot = gain_vs_j_plot(gains, design.equal_j, out_dir / "gain_vs_j.png")
    transferred = {(cell.name, method): result for cell, method, result in _gains(cells, design, TRANSFER)}
    lines = [f"# {title}", "", machines_line(study_dir), "", *_overview(table, design, gains, transferred, interval_label(study_dir)), "",
             *_prediction_lines(prediction_verdicts(replace(results, outcomes=with_holm(results.outcomes))), results.pairs), "",
             *outcomes_table(results.outcomes), "", judges_note(results.outcomes), "",
             "The hacking gap is not reported: under random noise its expectation is fpr - (fpr + fnr) x accuracy "
             "whatever the policy learnt, so it restates pass@1.", "",
             f"![learning gain against Youden's J, paired 95% CIs]({plot.name})", ""]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    failed = int((table["status"] != "ok").sum())
    return CellStudyReport(report, summary_csv, summary_json, written, len(table), failed)


Gain = tuple[NoiseCell, str, Paired | None]
"""(cell, method, its pass@1 gain over base, paired)."""


def _treatments(cells: Mapping[CellKey, dict[int, Path]], reference: str) -> list[str]:
    """The trained methods besides the reference method, by name."""
    return sorted({method for _, method in cells} - {BASE, reference})


def _gains(cells: Mapping[CellKey, dict[int, Path]], design: SweepDesign, metric: str = PASS) -> list[Gain]:
    """Each trained arm's gain over base in `metric` (pass@1 under the strict or the transferred judge)."""
    base = cells.get((design.reference, BASE), {})
    gains = []
    reference = reference_method()
    for name, cell in design.cells.items():
        for method in (reference, *_treatments(cells, reference)):
            if (name, method) in cells and base:
                gains.append((cell, method, paired(cells[(name, method)], base, metric)))
    return gains


def _overview(table, design: SweepDesign, gains: list[Gain], transferred: Mapping[tuple[str, str], Paired | None],
              interval: str) -> list[str]:
    ok = table[table["status"] == "ok"]
    base = ok[ok["method"] == BASE]["pass_at_1"]
    lines = [f"{len(table)} conditions, {len(table) - len(ok)} failed. Test split, pass@1 judged by the independent "
             f"judge; base (the warm-started policy, no RL): {fmt(base.mean() if len(base) else None)} over "
             f"{len(base)} seeds. Gain: pass@1 minus base's, paired by prompt and seed ({interval}); under the "
             "strict judge and the transferred one (docs/metrics.md).", "",
             "| cell | fpr | fnr | J | method | seeds | pass@1 | gain over base [95% CI] | "
             "gain, transferred judge [95% CI] |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell, method, result in sorted(gains, key=lambda g: (-g[0].youden, g[0].fnr, g[1])):
        rows = ok[(ok["cell"] == cell.name) & (ok["method"] == method)]
        role = " (clean reference)" if cell.name == design.reference else (
            " (random-reward control)" if cell.name == design.random_control else "")
        gain = "-" if result is None else result.describe()
        other = transferred.get((cell.name, method))
        gain_transferred = "-" if other is None else other.describe()
        lines.append(f"| {cell.name}{role} | {cell.fpr:g} | {cell.fnr:g} | {cell.youden:g} | {method} | {len(rows)} | "
                     f"{fmt(rows['pass_at_1'].mean() if len(rows) else None)} | {gain} | {gain_transferred} |")
    failed = table[table["status"] != "ok"]
    lines += [f"- failed: {row['name']}: {row['error']}" for _, row in failed.iterrows()]
    return lines


def _prediction_lines(verdicts: dict[str, tuple[str, str]], pairs: Mapping[str, Paired | None]) -> list[str]:
    lines = ["## Predictions (declared in study.yaml before any cell ran)", "",
             f"| equal-J pair ({reference_method()}, pass@1 A - B) | 95% CI; equivalence test |", "| --- | --- |"]
    lines += [f"| {label} | {'-' if result is None else result.describe()} |" for label, result in pairs.items()]
    names = {"equal_j_equal_gain": "Equal J gives equal gain (Rate or Fate)",
             "precision_matters_more": "False positives hurt more than false negatives at equal J (precision matters more)"}
    lines.append("")
    lines += [f"- **{names.get(name, name)}: {verdict}.** {why}." for name, (verdict, why) in verdicts.items()]
    return lines
