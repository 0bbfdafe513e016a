"""Small plotting functions: one figure each, written as PNG with matplotlib's Agg backend.

Each takes a table (or seed statistics) and a path and returns the path. Error bars are one
sample standard deviation over seeds: a spread, not a significance test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on CI runners or in DVC stages

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402

from hackable_rl.report.aggregate import ok_rows, with_series  # noqa: E402
from hackable_rl.training.curves import curve_column  # noqa: E402

CORRECTNESS_COLUMN = curve_column("judge/correctness")

_DPI = 120


def _save(figure: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=_DPI)
    plt.close(figure)
    return path


def metric_vs_rate(stats: pd.DataFrame, ylabel: str, path: Path, zero_line: bool = False) -> Path:
    """Seed mean (line) and sd (error bar) of one metric against the corruption rate, per series."""
    figure, axes = plt.subplots(figsize=(6, 4))
    for series, rows in stats.groupby("series"):
        rows = rows.sort_values("rate")
        axes.errorbar(rows["rate"], rows["mean"], yerr=rows["sd"].fillna(0.0), marker="o", capsize=3, label=series)
    if zero_line:
        axes.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel("corruption rate")
    axes.set_ylabel(ylabel)
    # Name the training verifiers (channel, or channel/flaw), so the study's figures tell apart.
    verifiers = ", ".join(sorted(stats["verifier"].unique())) if "verifier" in stats else ""
    axes.set_title(f"{ylabel} vs corruption rate (mean ± sd over seeds)\nverifier: {verifiers or 'n/a'}",
                   fontsize="medium")
    if not stats.empty:
        axes.legend()
    return _save(figure, path)


def scatter_by_method(table: pd.DataFrame, x: str, y: str, xlabel: str, ylabel: str, path: Path) -> Path:
    """One point per ok condition, coloured by series; the diagonal y = x where both are shares."""
    rows = with_series(ok_rows(table)).dropna(subset=[x, y]) if x in table and y in table else table.iloc[:0]
    figure, axes = plt.subplots(figsize=(5, 5))
    for series, part in rows.groupby("series"):
        axes.scatter(part[x].astype(float), part[y].astype(float), label=series, alpha=0.75)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(f"{ylabel} vs {xlabel} (one point per condition)")
    if not rows.empty:
        axes.legend()
    return _save(figure, path)


def observed_vs_correct(table: pd.DataFrame, path: Path) -> Path:
    """Observed training-verifier reward against independent correctness; above the diagonal the
    verifier pays more than the judge grants (a positive hacking gap)."""
    rows = with_series(ok_rows(table))
    rows = rows.dropna(subset=["observed_reward", "pass_at_1"]) if "observed_reward" in rows else rows.iloc[:0]
    figure, axes = plt.subplots(figsize=(5, 5))
    for series, part in rows.groupby("series"):
        axes.scatter(part["pass_at_1"].astype(float), part["observed_reward"].astype(float), label=series, alpha=0.75)
    axes.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--", label="observed = correct")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("independent correctness (pass@1)")
    axes.set_ylabel("observed reward (training verifier)")
    axes.set_title("observed reward vs correctness")
    axes.legend()
    return _save(figure, path)


def pass_at_k_curves(table: pd.DataFrame, path: Path) -> Path:
    """pass@k against k, one panel per rate, one line (seed mean) per series."""
    ks = sorted(int(c.removeprefix("pass_at_")) for c in table.columns
                if c.startswith("pass_at_") and c.removeprefix("pass_at_").isdigit())
    rows = with_series(ok_rows(table))
    rates = sorted(rows["rate"].dropna().unique()) or [None]
    figure, axes = plt.subplots(1, len(rates), figsize=(3.2 * len(rates), 3.4), sharey=True, squeeze=False)
    for axis, rate in zip(axes[0], rates, strict=True):
        at_rate = rows[rows["rate"] == rate]
        for series, part in at_rate.groupby("series"):
            means = [part[f"pass_at_{k}"].astype(float).mean() for k in ks]
            axis.plot(ks, means, marker="o", label=series)
        axis.set_title(f"rate {rate:g}" if rate is not None else "no data")
        axis.set_xlabel("k")
        axis.set_xticks(ks)
    axes[0][0].set_ylabel("pass@k (seed mean)")
    if not rows.empty:
        axes[0][-1].legend(fontsize="small")
    return _save(figure, path)


def training_curves(curves: dict[str, list[pd.DataFrame | None]], title: str, path: Path,
                    corrupted: str | None = None) -> Path:
    """Two panels on one y scale. Left: judge correctness on the training prompts against the step, one
    colour per policy and one line style per seed, so the clean and corrupted runs read on shared axes.
    Right: for the `corrupted` policy (a key of `curves`), what the training verifier paid (observed
    reward) against what the judge found correct, per seed: the distance between them is the hacking
    gap during training. Every raw per-step curve is drawn faint, its moving average over it."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for colour, (label, seeds) in zip(_COLOURS[1:], curves.items(), strict=False):
        _seed_lines(left, seeds, CORRECTNESS_COLUMN, colour, label)
    for column, (name, colour) in _VERIFIER_VS_JUDGE.items():
        _seed_lines(right, curves.get(corrupted, []), column, colour, name)
    left.set_title("judge correctness: clean reference vs corrupted runs", fontsize="medium")
    right.set_title(f"{corrupted or 'corrupted runs'}: verifier reward vs judge", fontsize="medium")
    for axes in (left, right):
        axes.set_xlabel("GRPO step")
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize="small")
    left.set_ylabel(f"share of sampled completions ({SMOOTHING_STEPS}-step moving average)")
    left.set_ylim(0, 1)
    figure.suptitle(title, fontsize="medium")
    return _save(figure, path)


SMOOTHING_STEPS = 10
"""Window of the centred moving average drawn over each raw training curve (64 completions a step are noisy)."""
# Colours of their own: the left panel's colours name policies, these name quantities.
_VERIFIER_VS_JUDGE = {curve_column("reward/observed"): ("verifier reward (observed)", "#8172b3"),
                      CORRECTNESS_COLUMN: ("judge correctness", "#4c72b0")}


def _seed_lines(axes: plt.Axes, seeds: list[pd.DataFrame | None], column: str, colour: str, label: str) -> None:
    """One run per seed: the raw curve faint, its moving average solid, dashed or dotted by seed."""
    for index, curve in enumerate(seeds):
        if curve is None or column not in curve:
            continue
        values = curve[column].astype(float)
        axes.plot(curve["step"], values, color=colour, alpha=0.2, linewidth=0.8)
        smoothed = values.rolling(SMOOTHING_STEPS, center=True, min_periods=1).mean()
        axes.plot(curve["step"], smoothed, color=colour, linewidth=2, linestyle=("-", "--", ":")[index % 3],
                  label=f"{label}, seed {index}")


_COLOURS = ("#999999", "#55a868", "#dd8452", "#4c72b0")


def policy_panels(sampled: dict[str, Any], greedy: dict[str, Any], labels: dict[str, str], title: str,
                  path: Path) -> Path:
    """Two panels on one y scale: sampled pass@1 and greedy accuracy per policy, each bar with its
    95% t-interval whisker across replicates (`Comparison`-like values with diff, ci_low, ci_high; no
    whisker with one replicate); n/a where not evaluated."""
    figure, panels = plt.subplots(1, 2, figsize=(9, 4), sharey=True)
    for axes, values, name in ((panels[0], sampled, "sampled pass@1"), (panels[1], greedy, "greedy accuracy")):
        names = list(values)
        means = [values[n].diff if values[n] is not None else 0.0 for n in names]
        whiskered = {n: values[n] is not None and values[n].ci_low is not None for n in names}
        errors = [[max(0.0, values[n].diff - values[n].ci_low) if whiskered[n] else 0.0 for n in names],
                  [max(0.0, values[n].ci_high - values[n].diff) if whiskered[n] else 0.0 for n in names]]
        bars = axes.bar([labels[n] for n in names], means, yerr=errors, capsize=4,
                        color=list(_COLOURS[: len(names)]))
        for bar, n in zip(bars, names, strict=True):
            text = "n/a" if values[n] is None else f"{values[n].diff:.3f}"
            axes.annotate(text, (bar.get_x() + bar.get_width() / 2, 0.02), ha="center", va="bottom", fontsize=8)
        axes.set_title(name)
        axes.tick_params(axis="x", labelsize=7, rotation=15)
    panels[0].set_ylabel("test correctness (95% CI across replicates)")
    panels[0].set_ylim(0, 1)
    figure.suptitle(title, fontsize="medium")
    return _save(figure, path)


def gain_vs_j_plot(gains: list[tuple[Any, str, Any]], equal_j: tuple[tuple[str, str], ...], path: Path) -> Path:
    """Learning gain (pass@1 over base) against Youden's J, per method, with paired 95% CI whiskers
    (not seed sd: each point is paired with base by prompt and seed). The line joins the symmetric
    cells; the asymmetric ones stand beside them at their J: ^ more false positives, v more false
    negatives (nudged left and right so that the equal-J cells do not hide each other)."""
    marked = {name for pair in equal_j for name in pair}
    figure, axes = plt.subplots(figsize=(6.5, 4.5))
    methods = list(dict.fromkeys(method for _, method, _ in gains))  # the reference method first
    offsets = [(index - (len(methods) - 1) / 2) * 0.016 for index in range(len(methods))]
    for offset, method in zip(offsets, methods, strict=True):
        points = sorted(((cell, result) for cell, m, result in gains if m == method and result is not None),
                        key=lambda point: point[0].youden)
        if not points:
            continue
        symmetric = [(c, r) for c, r in points if c.fpr == c.fnr]
        colour = axes.plot([c.youden + offset for c, _ in symmetric], [r.diff for _, r in symmetric], label=method)[0].get_color()
        for cell, result in points:
            balance = (cell.fpr > cell.fnr) - (cell.fpr < cell.fnr)
            marker = {0: "o", 1: "^", -1: "v"}[balance]
            axes.errorbar(cell.youden + offset - 0.03 * balance, result.diff,
                          yerr=[[result.diff - result.ci_low], [result.ci_high - result.diff]], marker=marker,
                          markersize=8 if cell.name in marked else 5, capsize=3, color=colour, linestyle="none")
    axes.axhline(0.0, color="grey", linewidth=0.8)
    axes.set_xlabel("Youden's J = 1 - FPR - FNR of each member")
    axes.set_ylabel("test pass@1 gain over base (paired 95% CI)")
    axes.set_title("Learning gain against the verifier's Youden's J, per method", fontsize="medium")
    axes.legend(handles=[*axes.get_legend_handles_labels()[0], *_balance_key(bool(marked))], fontsize="small")
    return _save(figure, path)


def _balance_key(with_pairs: bool) -> list[Any]:
    """Legend entries for the markers: which error the asymmetric cells have more of."""
    # deferred: matplotlib loads only where a figure is drawn
    from matplotlib.lines import Line2D

    key = [("o", 5, "symmetric (FPR = FNR)"), ("^", 5, "more false positives"), ("v", 5, "more false negatives")]
    if with_pairs:
        key.append(("o", 8, "large: an equal-J pair"))
    return [Line2D([], [], marker=marker, markersize=size, color="grey", linestyle="none", label=label)
            for marker, size, label in key]
