"""The real pretrained policy's study (pipelines/smollm2_study, `report_kind: real_model` in its study.yaml):
does GRPO improve a real LM here, what 40% random flips cost it, and does it take a natural blind spot?

One training-verifier member per cell: the clean reference (`reference.cell`), a noise cell (the
member flipped at fpr = fnr), and a blind-spot cell (the member pays the exploited flaw's pattern).
The declared outcomes, each A - B paired by prompt and seed, pass@1 rows under both judges (the
transferred one secondary):

    clean_gain              clean reference vs base: pass@1, met at ci_low > 0
    flip_cost               noise cell vs clean reference: pass@1, met at ci_high < 0
    pattern_share_rises     blind-spot cell vs base: the flaw's pattern share, met at a ratio
                            mean_a / mean_b >= PATTERN_RATIO with ci_low > 0
    blind_pass_at_1_falls   blind-spot cell vs clean reference: pass@1, met at ci_high < 0
    <method>_vs_<reference method>   (a study with a noisy ensemble: a noise cell of several members)
                            the other method that runs there (robust, in smollm2_learning) against the
                            reference's: pass@1, two-sided, met at ci_low > 0, with the equivalence test
                            at the study's margin

each pass@1 row followed by greedy accuracy on the same pair (secondary: GRPO can sharpen sampled
pass@1 while the greedy answer moves otherwise); then secondary: the trained cells against base
(pass@1), and the ensemble's baseline against the one-member noise cell. A study declaring fewer than
the spec's replicates (`small_n_reason`) has the small n and its reason printed above the table. A study
declaring `budget_hours` gets what its stages took against that budget (cost.json beside the report), from
the seconds its conditions and its warm starts (`metrics/warmstart/s<seed>/warmstart.json` in the study's
folder, as its dvc.yaml writes them) recorded. How far training moved each arm from its base, per
replicate, is described beside the outcomes (report.moved: moved.csv), and what training did on its own
samples, first tenth of the steps against the last, for every trained arm (report.training_tenths).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hackable_rl.config.study import MIN_PRIMARY_REPLICATES, StudyFile, load_study, study_file_beside
from hackable_rl.core.jsonl import write_json
from hackable_rl.extensions import reference_method
from hackable_rl.report.blind_spots import outcomes_markdown, overview, payoff_lines
from hackable_rl.report.conditions import interval_label, machines_line, study_table
from hackable_rl.report.declared import (
    CellKey,
    CellStudyReport,
    Outcome,
    both_judges,
    in_declared_family,
    labelled,
    load_cell_conditions,
    paired_outcome,
    write_outcomes,
)
from hackable_rl.report.moved import moved_from_base, moved_lines, write_moved
from hackable_rl.report.natural import PATTERN_RATIO
from hackable_rl.report.study_plots import curves_by_cell_plot, learning_curves_by_cell_plot
from hackable_rl.report.training_tenths import tenths_lines
from hackable_rl.study.budget import MeasuredCost, measured_cost
from hackable_rl.study.cells import NoiseCell, cell_roles, read_cell, study_cells
from hackable_rl.study.records import BASE, find_condition_files, write_summary

__all__ = ["REPORT_KIND", "build_real_model_report", "real_model_outcomes"]

REPORT_KIND = "real_model"
WARM_START_METRICS = "metrics/warmstart"
"""Where a real-model study's warm starts write warmstart.json (s<seed>/), beside its results folder."""
COST_FILE = "cost.json"


@dataclass(frozen=True)
class CellKinds:
    """What each of a real-model study's cells is."""

    reference: str
    """The clean reference's cell."""
    noise: str | None = None
    """The first one-member noise cell (random flips)."""
    blind: str | None = None
    """The first blind-spot cell."""
    ensemble: str | None = None
    """The first noise cell of several members (a noisy ensemble), where a second method meets the reference's."""
    contender: str | None = None
    """The trained method other than the reference's that runs in the ensemble cell (its `<method>_cells`)."""


def _cells_by_kind(study_file: Path) -> CellKinds:
    """The kinds of cell the study file declares (CellKinds)."""
    study = load_study(study_file)
    kinds = {"reference": study.reference.cell if study.reference else "clean"}
    for name in study_cells(study_file):
        cell = read_cell(study_file, name)
        kind = "blind" if not isinstance(cell, NoiseCell) else "ensemble" if (cell.members or 1) > 1 else "noise"
        kinds.setdefault(kind, name)
    if "ensemble" in kinds:
        kinds["contender"] = next((method for method in study.trained_methods() if method != reference_method()
                                   and kinds["ensemble"] in study.method_cells.get(method, list(study.cells))), None)
    return CellKinds(**kinds)


def _with_greedy(name: str, cell: str, a_label: str, b_label: str, a: Mapping[int, Path], b: Mapping[int, Path],
                 target: str, met_rule, margin: float | None = None) -> list[Outcome]:
    """The pass@1 outcome under both judges, then greedy accuracy on the same pair (secondary)."""
    judged = both_judges(name, cell, a_label, b_label, a, b, target, met_rule, margin)[0]
    greedy_target = target.replace("pass@1", "greedy accuracy")
    greedy = paired_outcome(name, cell, a_label, b_label, a, b, "greedy_accuracy", greedy_target, met_rule, margin)[0]
    return [*judged, replace(greedy, secondary=True)]


def real_model_outcomes(cells: Mapping[CellKey, dict[int, Path]], kinds: CellKinds,
                        margin: float | None = None) -> list[Outcome]:
    """The declared outcomes, then the secondary rows (each trained cell against base)."""
    method = reference_method()  # the method every cell trains (the extensions declare which)
    base = next((seeds for (_, name), seeds in cells.items() if name == BASE), {})
    clean = cells.get((kinds.reference, method), {})
    trained = {kind: cells.get((cell, method), {}) if cell else {}
               for kind, cell in (("noise", kinds.noise), ("blind", kinds.blind), ("ensemble", kinds.ensemble))}
    at_clean = f"{method}@{kinds.reference}"
    above, below = (lambda a, b, p: p.above_zero), (lambda a, b, p: p.below_zero)
    outcomes = [
        *_with_greedy("clean_gain", kinds.reference, method, BASE, clean, base, "pass@1 above base, ci_low > 0", above),
        *_with_greedy("flip_cost", kinds.noise or "-", method, at_clean, trained["noise"], clean,
                      "pass@1 below the clean reference, ci_high < 0", below),
        paired_outcome("pattern_share_rises", kinds.blind or "-", method, BASE, trained["blind"], base, "exploit_share",
                       f"pattern share >= {PATTERN_RATIO:g}x base's and ci_low > 0",
                       lambda a, b, p: b > 0 and a >= PATTERN_RATIO * b and p.above_zero)[0],
        *_with_greedy("blind_pass_at_1_falls", kinds.blind or "-", method, at_clean, trained["blind"], clean,
                      "pass@1 below the clean reference, ci_high < 0", below),
    ]
    if kinds.ensemble and kinds.contender:
        contender = cells.get((kinds.ensemble, kinds.contender), {})
        outcomes += _with_greedy(f"{kinds.contender}_vs_{method}", kinds.ensemble, kinds.contender, method, contender,
                                 trained["ensemble"], f"pass@1 above {method}'s in the noisy ensemble, ci_low > 0",
                                 above, margin)
    for name, kind in (("flip_vs_base", "noise"), ("blind_vs_base", "blind"), ("ensemble_vs_base", "ensemble")):
        cell = getattr(kinds, kind)
        if cell:
            outcomes += both_judges(name, cell, method, BASE, trained[kind], base, "pass@1 above base, ci_low > 0", above)[0]
    if kinds.ensemble and kinds.noise:
        outcomes += both_judges("ensemble_vs_one_member", kinds.ensemble, method, f"{method}@{kinds.noise}",
                                trained["ensemble"], trained["noise"], "pass@1 differs, two-sided",
                                lambda a, b, p: p.above_zero or p.below_zero)[0]
    return outcomes


PAYOFF_HEADING = "## Payoff before training (the payoff stage's training prompts: its `--prompts` in dvc.yaml)"


def _noise_gap_lines(noise: str | None) -> list[str]:
    """Random flips pay wrong answers at their rate: the noise cell's hacking gap restates accuracy."""
    if noise is None:
        return []
    return ["", f"The hacking gap of cell {noise} restates its accuracy under random flips (a wrong answer is paid "
                "at the flip rate whatever the policy does): it is not read as hacking."]


def _equivalence_lines(outcomes: list[Outcome]) -> list[str]:
    """The equivalence readings (TOST against the study's margin) of the outcomes that declare one."""
    tested = [o for o in outcomes if o.equivalence is not None]
    if not tested:
        return []
    return ["", "Equivalence (TOST against the declared margin; \"equivalent\" only when the 90% interval lies "
                "inside it):", "", *(f"- {o.name} in {o.cell}, {o.a} vs {o.b}, {o.metric}: {o.equivalence}" for o in tested)]


def _small_n_lines(study_file: Path) -> list[str]:
    study = load_study(study_file)
    declared = study.primary_replicates
    if declared >= MIN_PRIMARY_REPLICATES:
        return []
    return [f"**Small n: {declared} replicates**, below the spec's {MIN_PRIMARY_REPLICATES} for a primary outcome "
            f"(declared before running; the reason: {' '.join((study.small_n_reason or '').split())}). "
            f"Every interval below is a t-interval on {declared - 1} degrees of freedom: wide, and a verdict "
            "from it is weaker than a five-replicate one.", ""]


def _measured(study_dir: Path, study: StudyFile) -> MeasuredCost | None:
    """What the study's stages recorded, where it declares a budget to hold it against (else None)."""
    if study.budget_hours is None:
        return None
    warm_starts = Path(study_dir).resolve().parent / WARM_START_METRICS
    return measured_cost(find_condition_files(study_dir),
                         [path for seed in study.seeds if (path := warm_starts / f"s{seed}" / "warmstart.json").is_file()])


def _cost_lines(cost: MeasuredCost | None, budget_hours: float | None) -> list[str]:
    """The report's section on what the stages took against the declared budget; nothing without one."""
    if cost is None or budget_hours is None:
        return []
    within = "inside" if cost.wall_hours <= budget_hours else "over"
    return ["## What the study cost (measured)", "",
            f"The seconds each stage recorded, one lane each: {cost.describe()}; {within} the declared budget of "
            f"{budget_hours:g} h. Stages that shared the machine with other work took longer than alone, and a "
            f"condition resumed from a checkpoint records only its last run (`{COST_FILE}`).", ""]


def build_real_model_report(study_dir: Path, out_dir: Path, title: str, outcomes_path: Path | None) -> CellStudyReport:
    """summary.csv/json, the training-curve plot, report.md and (given a path) outcomes.json."""
    study_file = study_file_beside(study_dir)
    table = study_table(study_dir)
    summary_csv, summary_json = write_summary(table, out_dir)
    cells = load_cell_conditions(study_dir)
    kinds = _cells_by_kind(study_file)
    study = load_study(study_file)
    outcomes = labelled(in_declared_family(real_model_outcomes(cells, kinds, study.equivalence_margin),
                                           study.family or None), interval_label(study_dir))
    written = write_outcomes(outcomes_path, outcomes) if outcomes_path else None
    plot = curves_by_cell_plot(cells, out_dir / "training_curves.png")
    learning = learning_curves_by_cell_plot(cells, out_dir / "learning_curves.png")
    moved = moved_from_base(cells)
    write_moved(moved, out_dir)
    cost = _measured(study_dir, study)
    if cost is not None:
        write_json(out_dir / COST_FILE, cost.as_dict() | {"budget_hours": study.budget_hours})
    patterns = (study.exploited_flaw,) if kinds.blind else ()
    lines = [f"# {title}", "", machines_line(study_dir), "", *_small_n_lines(study_file), *overview(table, cells, tuple(p for p in patterns if p)), "",
             *outcomes_markdown(outcomes, []), *_equivalence_lines(outcomes), *_noise_gap_lines(kinds.noise), "",
             *moved_lines(moved), *tenths_lines(table),
             *payoff_lines(Path(study_dir), cell_roles(study_file), PAYOFF_HEADING), "",
             *_cost_lines(cost, study.budget_hours),
             f"![exploit share and hacking gap over training, per cell]({plot.name})", "",
             f"![judge correctness and training reward over training, per cell]({learning.name})", ""]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    failed = int((table["status"] != "ok").sum())
    return CellStudyReport(report, summary_csv, summary_json, written, len(table), failed)
