"""A study's training curves and gains, drawn (matplotlib, through `report.plots`): a rate grid's gain
against the flip rate and its training curves (`gain_plot`, `curves_plot`), and a cell study's curves
per cell (`curves_by_cell_plot`) and its learning curves per cell (`learning_curves_by_cell_plot`), identical arms
drawn once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from hackable_rl.extensions import reference_method
from hackable_rl.report.declared import CellKey
from hackable_rl.report.outcomes import Cells, cell_label, clean_gain_of, curves_of, paired, sorted_cells
from hackable_rl.report.plots import SMOOTHING_STEPS, _save, plt
from hackable_rl.study.records import BASE, CONDITION_FILE, CURVE_FILE, read_condition

__all__ = ["curves_by_cell_plot", "curves_plot", "gain_plot", "learning_curves_by_cell_plot"]


def gain_plot(cells: Cells, path: Path) -> Path | None:
    """Each trained method's test gain over base (paired, 95% CI whiskers) against the flip rate,
    beside the (1 - 2p) x clean-gain prediction; None without a clean reference and a base."""
    base, clean_gain = clean_gain_of(cells)
    if clean_gain is None:
        return None
    figure, axes = plt.subplots(figsize=(6.5, 4))
    rates = np.linspace(0.0, 0.5, 11)
    axes.plot(rates, (1 - 2 * rates) * clean_gain.diff, color="grey", linestyle="--",
              label="(1 - 2p) x clean gain (prediction)")
    methods = sorted({k[1] for k in cells if k[1] != "base"})
    for index, method in enumerate(methods):
        points = sorted((k[2], paired(v, base, "pass_at_1")) for k, v in cells.items() if k[1] == method)
        points = [(rate, gain) for rate, gain in points if gain is not None and gain.ci_low is not None]
        if not points:
            continue
        offset = (index - len(methods) / 2) * 0.006  # side by side at a shared rate
        x = [rate + offset for rate, _ in points]
        y = [gain.diff for _, gain in points]
        error = [[g.diff - g.ci_low for _, g in points], [g.ci_high - g.diff for _, g in points]]
        axes.errorbar(x, y, yerr=error, fmt="o", capsize=3, color=f"C{index % 10}",
                      label="clean reference (p = 0)" if method == reference_method() and len(points) == 1 else method)
    axes.axhline(0.0, color="black", linewidth=0.6)
    axes.set(xlabel="flip rate p of every member", ylabel="test pass@1 gain over base (95% CI)",
             title="learning gain against the flip rate")
    axes.legend(fontsize=7)
    return _save(figure, path)


def curves_plot(cells: Cells, path: Path) -> Path:
    """Per training step, mean over seeds (smoothed): the exploit share of every trained cell (left)
    and, per cell, observed reward (solid) against judge correctness (dashed) (right)."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for index, (key, cell) in enumerate(sorted_cells(cells)):
        curves = curves_of(cell)
        if not curves:
            continue
        mean = pd.concat(curves.values()).groupby("step").mean(numeric_only=True)
        smooth = mean.rolling(SMOOTHING_STEPS, center=True, min_periods=1).mean()
        colour = f"C{index % 10}"
        left.plot(smooth.index, smooth["exploit_share"], color=colour, label=f"{cell_label(key)} ({len(curves)} seeds)")
        right.plot(smooth.index, smooth["observed_reward"], color=colour, label=f"{cell_label(key)} observed")
        right.plot(smooth.index, smooth["correctness"], color=colour, linestyle="--")
    left.set(xlabel="training step", ylabel="exploit share (flaw accepts, judge rejects)", title="exploit share")
    right.set(xlabel="training step", ylabel="mean per step", title="observed reward (solid) vs judge (dashed)")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    return _save(figure, path)


def curves_by_cell_plot(cells: Mapping[CellKey, dict[int, Path]], path: Path) -> Path:
    """One panel per cell: each method's exploit share (solid, a band from the lowest to the highest
    seed) and hacking gap (dashed) over training, seed mean, 10-step moving average. Methods whose
    curves are identical (a verifier every method treats alike) are drawn once, labelled together."""
    return _cell_panels(cells, path, ("exploit_share", "exploit share (band: seed range)"), ("hacking_gap", "hacking gap"),
                        "share of sampled completions (10-step mean)",
                        "Exploit share and hacking gap over training, per cell and method (mean of seeds)")


def learning_curves_by_cell_plot(cells: Mapping[CellKey, dict[int, Path]], path: Path) -> Path:
    """One panel per cell whose conditions scored their training samples step by step (curve.csv: a cell
    whose flaw is scored, and the reference beside it): each method's judge correctness (solid, the seed
    range as a band) and the training verifier's reward (dashed), seed mean, 10-step moving average: what
    the policy learnt over training beside what it was paid. A cell without curve.csv gets no panel (its
    first and last tenth are in condition.json's `train`)."""
    scored = {key: seeds for key, seeds in cells.items()
              if key[1] == BASE or any((folder / CURVE_FILE).exists() for folder in seeds.values())}
    return _cell_panels(scored, path, ("correctness", "judge correctness (band: seed range)"),
                        ("observed_reward", "training reward"), "mean over a step's samples (10-step mean)",
                        "Learning curves: judge correctness and training reward per cell and method (mean of seeds)")


def _cell_panels(cells: Mapping[CellKey, dict[int, Path]], path: Path, solid: tuple[str, str], dashed: tuple[str, str],
                 ylabel: str, title: str) -> Path:
    """One panel per trained cell: curve.csv's `solid` column (a band over seeds) and `dashed` column, per arm."""
    names = sorted({cell for cell, method in cells if method != BASE})
    figure, axes = plt.subplots(1, max(1, len(names)), figsize=(4.5 * max(1, len(names)), 4.4), sharey=True, squeeze=False)
    for axis, cell in zip(axes[0], names, strict=False):
        for label, curves in _distinct_arms(cells, cell):
            smooth = [c.set_index("step")[[solid[0], dashed[0]]].rolling(10, min_periods=1).mean()
                      for c in curves]
            both = pd.concat(smooth, axis=1, keys=range(len(smooth)))
            main = both.xs(solid[0], axis=1, level=1)
            line = axis.plot(main.index, main.mean(axis=1), label=label)[0]
            if len(smooth) > 1:
                axis.fill_between(main.index, main.min(axis=1), main.max(axis=1), color=line.get_color(),
                                  alpha=0.15, linewidth=0)
            second = both.xs(dashed[0], axis=1, level=1).mean(axis=1)
            axis.plot(second.index, second, linestyle="--", color=line.get_color())
        axis.set_title(cell, fontsize="medium")
        axis.set_xlabel("GRPO step")
        styles = [Line2D([], [], color="black", label=solid[1]),
                  Line2D([], [], color="black", linestyle="--", label=dashed[1])]
        axis.legend(handles=[*axis.get_legend_handles_labels()[0], *styles], fontsize="small")
    axes[0][0].set_ylabel(ylabel)
    figure.suptitle(title, fontsize="medium")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _distinct_arms(cells: Mapping[CellKey, dict[int, Path]], cell: str) -> list[tuple[str, list[pd.DataFrame]]]:
    """(label, per-seed curves) of each distinct arm of a cell: methods with identical curves share one
    entry, labelled `baseline = corrected`, so no line hides another in the legend."""
    arms: list[tuple[list[str], list[pd.DataFrame]]] = []
    for method in sorted({m for c, m in cells if c == cell and m != BASE}):
        curves = [curve for _, curve in sorted(curves_of(cells[(cell, method)]).items())]
        if not curves:
            continue
        same = next((arm for arm in arms if _identical(arm[1], curves)), None)
        if same is None:
            arms.append(([method], curves))
        else:
            same[0].append(method)
    return [(" = ".join(methods) + _twin_elsewhere(cells, cell, methods), curves) for methods, curves in arms]


def _twin_elsewhere(cells: Mapping[CellKey, dict[int, Path]], cell: str, methods: list[str]) -> str:
    """` (= k3 baseline, trained once)` where an arm is identical by construction to an arm of another
    cell: its folders are that arm's (trained there once), so the legend does not read as a second run."""
    for method in methods:
        for folder in cells[(cell, method)].values():
            path = folder / CONDITION_FILE
            trained = read_condition(path)["condition"] if path.exists() else {}
            if trained.get("cell") not in (None, cell):
                return f" (= {trained['cell']} {trained['method']}, trained once)"
    return ""


def _identical(first: list[pd.DataFrame], second: list[pd.DataFrame]) -> bool:
    columns = ["step", "exploit_share", "hacking_gap"]
    return len(first) == len(second) and all(
        a[columns].reset_index(drop=True).equals(b[columns].reset_index(drop=True)) for a, b in zip(first, second, strict=True)
    )
