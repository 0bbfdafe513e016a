"""The study report: condition.json files -> summary.csv/json, PNG plots, report.md.

Every sentence in report.md is computed from the summary table: which method has the higher mean
correctness at each rate, whether the hacking gap grows with the rate, whether each method reduces
it against the reference method (`MethodSpec.report_role`). Unfavourable outcomes are written as plainly as favourable ones. A difference no
larger than one standard deviation over seeds is called indistinguishable at that number of seeds;
nothing is called equivalent except by the paired equivalence test against a declared margin
(`report.outcomes`). Controls are reported apart from the methods (`report.conditions`), and under a
channel whose hacking gap restates accuracy (`ChannelSpec.restates_accuracy`) the gap is labelled so and no claim is read from it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from hackable_rl.extensions import reference_method, restates_accuracy
from hackable_rl.report import plots
from hackable_rl.report.aggregate import CORRECTNESS, seed_stats, slope, with_series
from hackable_rl.report.conditions import (
    CONTROL_PREFIX,
    interval_label,
    methods_and_controls,
    study_table,
)
from hackable_rl.report.outcomes import curves_of as curves_of_cell
from hackable_rl.report.outcomes import load_cells, outcomes_markdown
from hackable_rl.report.study_plots import curves_plot, gain_plot
from hackable_rl.study.records import study_methods, write_summary

log = logging.getLogger(__name__)

PLOTS = {
    "correctness_vs_rate": "correctness_vs_rate.png",
    "hacking_gap_vs_rate": "hacking_gap_vs_rate.png",
    "observed_vs_correctness": "observed_vs_correctness.png",
    "disagreement_vs_correctness": "disagreement_vs_correctness.png",
    "pass_at_k": "pass_at_k.png",
}


@dataclass(frozen=True)
class StudyReport:
    report: Path
    summary_csv: Path
    summary_json: Path
    plots: dict[str, Path]
    conditions: int
    failed: int


def build_study_report(
    study_dir: Path, out_dir: Path, title: str = "hackable-rl corruption study", margin: float | None = None
) -> StudyReport:
    """Collects every condition.json below `study_dir` and writes the table, plots and report.md;
    `margin` is the study's declared equivalence margin (None: nothing is called equivalent)."""
    table = study_table(study_dir)
    summary_csv, summary_json = write_summary(table, out_dir)

    written = write_study_plots(methods_and_controls(table)[0], out_dir)
    cells = load_cells(study_dir)
    if any(curves for curves in map(curves_of_cell, cells.values())):
        written["training_curves"] = curves_plot(cells, out_dir / "training_curves.png")
    no_flaw = all(flaw is None for flaw, _, _ in cells)  # random channels: the gain against the rate
    if no_flaw and (gain := gain_plot(cells, out_dir / "gain_vs_rate.png")) is not None:
        written["gain_vs_rate"] = gain
    report = out_dir / "report.md"
    channels = sorted(set(table["channel"].dropna()))
    restated = ", ".join(channels) if channels and all(map(restates_accuracy, channels)) else None
    paired = outcomes_markdown(cells, margin, restated_gap=restated, interval=interval_label(study_dir))
    report.write_text(study_markdown(table, title, written, paired), encoding="utf-8")
    failed = int((table["status"] != "ok").sum())
    log.info("study report: %d conditions (%d failed) -> %s", len(table), failed, report)
    return StudyReport(report, summary_csv, summary_json, written, len(table), failed)


def write_study_plots(table: pd.DataFrame, out_dir: Path) -> dict[str, Path]:
    """The method cells' plots (controls are in the paired report and gain_vs_rate.png)."""
    restated = all(map(restates_accuracy, table["channel"].dropna()))
    gap_label = "hacking gap (restates pass@1)" if restated else "hacking gap"  # the title names the verifier
    return {
        "correctness_vs_rate": plots.metric_vs_rate(
            seed_stats(table, CORRECTNESS), "independent correctness (pass@1)", out_dir / PLOTS["correctness_vs_rate"]
        ),
        "hacking_gap_vs_rate": plots.metric_vs_rate(
            seed_stats(table, "hacking_gap"), gap_label, out_dir / PLOTS["hacking_gap_vs_rate"], zero_line=True
        ),
        "observed_vs_correctness": plots.observed_vs_correct(table, out_dir / PLOTS["observed_vs_correctness"]),
        "disagreement_vs_correctness": plots.scatter_by_method(
            table, CORRECTNESS, "disagreement", "independent correctness (pass@1)", "verifier disagreement U",
            out_dir / PLOTS["disagreement_vs_correctness"],
        ),
        "pass_at_k": plots.pass_at_k_curves(table, out_dir / PLOTS["pass_at_k"]),
    }


# --------------------------------------------------------------------------- numbers as text


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def cell(row: pd.Series | None) -> str:
    """`mean ± sd (n=N)`; a single seed has no sd and says so."""
    if row is None:
        return "–"
    sd = "sd n/a" if math.isnan(row["sd"]) else f"± {row['sd']:.3f}"
    return f"{row['mean']:.3f} {sd} (n={int(row['n'])})"


def _lookup(stats: pd.DataFrame, method: str, rate: float) -> pd.Series | None:
    match = stats[(stats["method"] == method) & (stats["rate"] == rate)]
    return None if match.empty else match.iloc[0]


def stats_table(stats: pd.DataFrame, metric_label: str) -> list[str]:
    """A markdown table: one row per rate, one column per method present."""
    present = set(stats["method"])
    methods = [m for m in study_methods() if m in present] + sorted(present - set(study_methods()))
    if not methods:
        return [f"No ok condition has {metric_label}."]
    lines = [f"| rate | {' | '.join(methods)} |", "|---|" + "---|" * len(methods)]
    for rate in sorted(stats["rate"].unique()):
        lines.append(f"| {rate:g} | " + " | ".join(cell(_lookup(stats, m, rate)) for m in methods) + " |")
    return lines


def distinguishable(a: pd.Series, b: pd.Series) -> str:
    """Whether the difference of two seed means exceeds the larger of their sds."""
    sds = [s for s in (a["sd"], b["sd"]) if not math.isnan(s)]
    if not sds:
        return "one seed each: no sd, so no spread to judge the difference against"
    if abs(a["mean"] - b["mean"]) <= max(sds):
        return "within one sd: not distinguishable at this number of seeds"
    return "larger than one sd"


def compare_methods(stats: pd.DataFrame, first: str, second: str, what: str, higher_is_better: bool) -> list[str]:
    """Per rate: is `first` above or below `second` on this metric, and by how much; then a summary
    that names, as unfavourable for `first`, every rate where it is not better."""
    lines, not_better = [], []
    for rate in sorted(stats["rate"].unique()):
        a, b = _lookup(stats, first, rate), _lookup(stats, second, rate)
        if a is None or b is None:
            continue
        diff = a["mean"] - b["mean"]
        lines.append(f"- rate {rate:g}: {first} {fmt(a['mean'])} vs {second} {fmt(b['mean'])}: {_relation(diff, first)} "
                     f"({distinguishable(a, b)}).")
        if (diff <= 0) if higher_is_better else (diff >= 0):
            not_better.append(f"{rate:g}")
    if not lines:
        return [f"- {first} and {second} share no rate with ok conditions: no comparison of {what}."]
    total, better = len(lines), "higher" if higher_is_better else "lower"
    if not_better:
        lines.append(f"- **Unfavourable for {first}:** its {what} is not {better} than {second}'s at "
                     f"{len(not_better)} of {total} rates ({', '.join(not_better)}).")
    else:
        lines.append(f"- {first}'s {what} is {better} than {second}'s at all {total} rates "
                     "(see the sd column before reading this as an effect).")
    return lines


def _relation(diff: float, name: str) -> str:
    if diff == 0:
        return "equal means"
    return f"{name} is {'higher' if diff > 0 else 'lower'} by {abs(diff):.3f}"


def gap_over_base(stats: pd.DataFrame, trained: str) -> list[str]:
    """Per rate: the trained method's gap above the untrained base's gap, and where it exceeds one sd."""
    lines, above = [], []
    for rate in sorted(stats["rate"].unique()):
        a, b = _lookup(stats, trained, rate), _lookup(stats, "base", rate)
        if a is None or b is None:
            continue
        diff = a["mean"] - b["mean"]
        lines.append(f"- rate {rate:g}: {trained} {fmt(a['mean'])} vs base {fmt(b['mean'])}: {_relation(diff, trained)} "
                     f"({distinguishable(a, b)}).")
        if diff > 0 and distinguishable(a, b) == "larger than one sd":
            above.append(f"{rate:g}")
    if not lines:
        return [f"- {trained} and base share no rate with ok conditions: no comparison."]
    where = f"at rates {', '.join(above)}" if above else "at no rate"
    lines.append(f"- {trained}'s gap exceeds the untrained policy's by more than one sd {where} "
                 f"({len(above)} of {len(lines)}).")
    return lines


def best_per_rate(stats: pd.DataFrame) -> list[str]:
    lines = []
    for rate in sorted(stats["rate"].unique()):
        rows = stats[stats["rate"] == rate].sort_values("mean", ascending=False)
        ranking = ", ".join(f"{r['method']} {fmt(r['mean'])}" for _, r in rows.iterrows())
        top = rows[rows["mean"] == rows.iloc[0]["mean"]]["method"].tolist()
        leader = f"**{top[0]}**" if len(top) == 1 else f"a tie between {', '.join(top)}"
        lines.append(f"- rate {rate:g}: highest mean correctness {leader} ({ranking}).")
    return lines


def trend(stats: pd.DataFrame, what: str) -> list[str]:
    """Per method: the metric at the lowest and highest rate and the least-squares slope."""
    lines = []
    for method, rows in stats.groupby("method"):
        rows = rows.sort_values("rate")
        if len(rows) < 2:
            lines.append(f"- {method}: one rate only, no trend.")
            continue
        low, high = rows.iloc[0], rows.iloc[-1]
        fitted = slope(rows["rate"], rows["mean"])
        change = high["mean"] - low["mean"]
        spread = max([s for s in (low["sd"], high["sd"]) if not math.isnan(s)], default=float("nan"))
        if not math.isnan(spread) and abs(change) <= spread:
            verdict = "no clear change (the difference is within one sd)"
        else:
            verdict = "grows with the rate" if change > 0 else "shrinks with the rate" if change < 0 else "is flat"
        lines.append(f"- {method}: {what} {fmt(low['mean'])} at rate {low['rate']:g} -> {fmt(high['mean'])} at rate "
                     f"{high['rate']:g} (slope {fmt(fitted)} per unit rate): {verdict}.")
    return lines


def _gap_section(gap: pd.DataFrame, verifier: str) -> list[str]:
    """The hacking gap's table and what is read from it; under a channel where the gap restates
    accuracy the table is labelled so and nothing is read from it (the excess gap is, above)."""
    if restates_accuracy(verifier):
        return ["### Hacking gap (observed reward - correctness), mean ± sd over seeds: restates pass@1 under "
                f"{verifier}", "", *stats_table(gap, "a hacking gap"), "",
                f"Under {verifier} at rate p the expected gap is p(1 - 2 acc) whatever the policy learnt "
                "(docs/metrics.md): these numbers restate correctness, so no trend or method comparison is read "
                "from them; the excess gap in the primary outcome above is what training added.", ""]
    lines = ["### Hacking gap (observed reward - correctness), mean ± sd over seeds", ""]
    lines += stats_table(gap, "a hacking gap") + [""]
    lines += ["Does the gap grow with the rate?", ""] + trend(gap, "hacking gap") + [""]
    lines += ["Trained vs untrained gap at the same rate (base's gap is the verifier's own error on the untrained "
              "policy; a trained gap above it is what GRPO added):", ""]
    for trained in study_methods()[1:]:
        lines += gap_over_base(gap, trained)
    lines += [""]
    reference = reference_method()
    for method in _treatments(gap):
        lines += [f"Does {method} reduce the gap (vs {reference})?", ""]
        lines += compare_methods(gap, method, reference, "hacking gap", False) + [""]
    return lines


def _treatments(stats: pd.DataFrame) -> list[str]:
    """The trained methods of a table besides base and the reference method, in report order."""
    present = set(stats["method"])
    return [m for m in study_methods()[1:] if m in present and m != reference_method()]


def _controls_section(controls: pd.DataFrame, verifier: str) -> list[str]:
    """The controls' own table, apart from the methods': what a reward without a correctness signal
    does (their paired gains over base are in the paired section above)."""
    if controls.empty:
        return []
    named = controls.assign(method=CONTROL_PREFIX + controls["control"].astype(str))
    gap = f"hacking gap (restates pass@1 under {verifier})" if restates_accuracy(verifier) else "hacking gap"
    columns = {CORRECTNESS: "pass@1", "hacking_gap": gap, "observed_reward": "observed reward"}
    stats = {metric: seed_stats(named, metric) for metric in columns}
    lines = ["### Controls (no correctness signal; kept out of the method tables above), mean ± sd over seeds", "",
             "| control | runs as | rate | " + " | ".join(columns.values()) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for (label, rate), rows in named.groupby(["method", "rate"]):
        values = [cell(_lookup(stats[metric], label, rate)) for metric in columns]
        lines.append(f"| {label} | {controls.loc[rows.index[0], 'method']} | {rate:g} | " + " | ".join(values) + " |")
    return [*lines, ""]


# --------------------------------------------------------------------------- report.md


def study_markdown(table: pd.DataFrame, title: str, written: dict[str, Path], paired: list[str] = ()) -> str:
    """report.md: the overview, the paired comparisons and primary outcomes (`report.outcomes`), then
    per training verifier the seed-spread tables."""
    labelled = with_series(table)
    methods, controls = methods_and_controls(labelled)
    lines = [f"# {title}", ""]
    lines += _overview(labelled) + list(paired)
    for verifier in sorted(labelled["verifier"].unique()):
        lines += _verifier_section(methods[methods["verifier"] == verifier], verifier)
        lines += _controls_section(controls[controls["verifier"] == verifier], verifier)
    lines += ["## Plots", ""]
    lines += [f"![{name}]({path.name})" for name, path in written.items()]
    lines += ["", "## Reading these numbers", "",
              "- Independent correctness is pass@1 from the clean judge on held-out prompts; the hacking gap is "
              "the mean normalised training-verifier reward minus that correctness on the same samples.",
              "- sd is the sample standard deviation over seeds (ddof 1); error bars show it. It is a spread, "
              "not a significance test; with few seeds, differences within one sd are not evidence.",
              "- pass@k rising alone does not show better single-attempt reasoning: read pass@1 beside it.",
              "- Failed conditions are listed above and left out of every mean; they stay in summary.csv/json.", ""]
    return "\n".join(lines)


def _overview(table: pd.DataFrame) -> list[str]:
    failed = table[table["status"] != "ok"]
    ok = table[table["status"] == "ok"]
    seeds = ok.groupby(["verifier", "method", "control", "rate"], dropna=False)["seed"].nunique()
    controls = sorted(set(table["control"].dropna()))
    lines = [f"{len(table)} conditions, {len(table) - len(failed)} ok, {len(failed)} failed"
             + (f", of which controls: {', '.join(controls)}" if controls else "")
             + f". Seeds per (method or control, rate) among ok conditions: {_seed_range(seeds)}.", ""]
    if not failed.empty:
        lines += ["### Failed conditions", "", "| condition | error |", "|---|---|"]
        lines += [f"| {row['name']} | {str(row['error']).replace('|', '/')} |" for _, row in failed.iterrows()]
        lines.append("")
    return lines


def _seed_range(seeds: pd.Series) -> str:
    if seeds.empty:
        return "none"
    low, high = int(seeds.min()), int(seeds.max())
    return f"n = {low}" if low == high else f"n = {low} to {high}"


def _verifier_section(table: pd.DataFrame, verifier: str) -> list[str]:
    correctness = seed_stats(table, CORRECTNESS)
    gap = seed_stats(table, "hacking_gap")
    observed = seed_stats(table, "observed_reward")
    lines = [f"## Training verifier: {verifier}", "", "### Independent correctness (pass@1), mean ± sd over seeds", ""]
    lines += stats_table(correctness, "pass@1") + [""]
    lines += best_per_rate(correctness) + [""]
    reference = reference_method()
    for method in _treatments(correctness):
        lines += [f"{method} vs {reference}:", ""] + compare_methods(correctness, method, reference, "correctness", True) + [""]
    lines += [f"GRPO ({reference}) vs no RL (base):", ""]
    lines += compare_methods(correctness, reference, "base", "correctness", True) + [""]
    lines += ["Correctness against the rate:", ""] + trend(correctness, "correctness") + [""]
    lines += _gap_section(gap, verifier)
    lines += ["### Observed training-verifier reward, mean ± sd over seeds", ""]
    lines += stats_table(observed, "an observed reward") + [""]
    return lines
