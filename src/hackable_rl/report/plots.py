"""Small plotting functions: one figure each, written as PNG with matplotlib's Agg backend.

Each takes a table (or seed statistics) and a path and returns the path. Error bars are one
sample standard deviation over seeds: a spread, not a significance test.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on CI runners or in DVC stages

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402

from hackable_rl.report.aggregate import ok_rows, with_series  # noqa: E402

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
    axes.set_title(f"{ylabel} vs rate (mean ± sd over seeds)")
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


def training_curve(curve: pd.DataFrame, path: Path) -> Path:
    """Per-step training metrics (sampled on training prompts) against the step."""
    figure, axes = plt.subplots(figsize=(7, 4))
    for column in curve.columns:
        if column != "step" and curve[column].notna().any():
            axes.plot(curve["step"], curve[column].astype(float), label=column)
    axes.axhline(0.0, color="grey", linewidth=0.6)
    axes.set_xlabel("GRPO step")
    axes.set_title("training curve (training prompts, sampled)")
    axes.legend(fontsize="small")
    return _save(figure, path)


def headline_bars(values: dict[str, float | None], path: Path) -> Path:
    """Bars for the headline accuracies; an unavailable value is labelled n/a instead of drawn as 0."""
    figure, axes = plt.subplots(figsize=(7, 4))
    names = list(values)
    heights = [values[name] if values[name] is not None else 0.0 for name in names]
    bars = axes.bar(names, heights, color=["#999999", "#4c72b0", "#55a868", "#dd8452"][: len(names)])
    for bar, name in zip(bars, names, strict=True):
        label = "n/a" if values[name] is None else f"{values[name]:.3f}"
        axes.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom")
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("held-out correctness")
    axes.set_title("warm start, base, clean-trained and trained")
    axes.tick_params(axis="x", labelsize=7)
    return _save(figure, path)
