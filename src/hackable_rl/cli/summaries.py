"""What a command tells the user about its result, built here so that a command only prints it: the
judge's count table, an evaluation's headline metrics, the warm start's outcome.

No torch, no matplotlib: `judge` and `eval` import this before any model loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hackable_rl.tracking.descriptions import EVAL_HEADLINE, shown_number

if TYPE_CHECKING:
    from rich.table import Table

    from hackable_rl.evaluation.judge import JudgeSummary

__all__ = ["eval_lines", "judge_table", "warmstart_line"]


def judge_table(summary: JudgeSummary, title: str) -> Table:
    """One row of counts: rows read, judged, correct, accuracy, unparseable, no answer."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("rows", "judged", "correct", "accuracy", "unparseable", "no answer"):
        table.add_column(column, justify="right")
    accuracy = "-" if summary.accuracy is None else f"{summary.accuracy:.4f}"
    counts = (summary.count, summary.judged, summary.correct, accuracy, summary.unparseable, summary.no_answer)
    table.add_row(*map(str, counts))
    return table


def eval_lines(metrics: dict[str, Any], out_dir: Path) -> list[str]:
    """The headline metrics an evaluation produced (floats to 4 places, undefined ones blank) and
    where everything was written."""
    pass_at_k = sorted(key for key in metrics if key.startswith("pass_at_") and key[8:].isdigit() and key != "pass_at_1")
    lines = [f"{key:>22}: {shown_number(metrics[key])}" for key in (*EVAL_HEADLINE, *pass_at_k) if key in metrics]
    return [*lines, f"written to {out_dir}"]


def warmstart_line(metrics: dict[str, Any], model_source: str) -> str:
    """The warm start's held-out greedy accuracy against its target band, its loss and time; when
    it measured none (a pretrained `model.source`), that its pinned reference was recorded."""
    if "accuracy" not in metrics:
        return f"pretrained policy {model_source}: reference recorded"
    band = metrics["target_accuracy"]
    where = "inside" if metrics["in_target"] else "OUTSIDE"
    loss = metrics["loss"]
    return (
        f"warm start: held-out greedy accuracy {metrics['accuracy']} (target {band[0]}-{band[1]}: {where}), "
        f"loss {loss['first']:.3f} -> {loss['last']:.3f}, {metrics['seconds']['total']:.0f} s"
    )
