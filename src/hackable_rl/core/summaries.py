"""What a command tells the user about its result, built here so that the CLI only prints it: the
judge's count table, an evaluation's headline metrics, the warm start's outcome.

No torch, no matplotlib: `judge` and `eval` import this before any model loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from hackable_rl.evaluation.judge import JudgeSummary

# The eval metrics printed first, in this order; pass@k for the other k follow.
_EVAL_HEADLINE = (
    "n_prompts", "n_samples", "pass_at_1", "greedy_accuracy", "hacking_gap", "observed_reward", "coverage",
    "false_positive_rate", "false_negative_rate",
)


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
    lines = [f"{key:>22}: {_number(metrics[key])}" for key in (*_EVAL_HEADLINE, *pass_at_k) if key in metrics]
    return [*lines, f"written to {out_dir}"]


def _number(value: Any) -> Any:
    if value is None:
        return ""
    return round(value, 4) if isinstance(value, float) else value


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


def train_description(final: dict[str, Any], identity: Any) -> str:
    """The Training section of a run's MLflow description: who the run is, how long it took, and each
    summarised curve metric over the first and the last tenth of its steps (train.json)."""
    lines = [
        f"{identity.method}, training verifier {identity.corruption_channel} at rate {identity.corruption_rate:g} "
        f"({identity.condition}), seed {identity.seed}: {final['step']} steps in {final['seconds']:.0f} s.",
        "",
        "| on training prompts (sampled) | first tenth | last tenth |",
        "| --- | --- | --- |",
    ]
    keys = sorted({key.rsplit("/", 1)[0] for key in final if key.endswith(("/first", "/last"))})
    lines += [f"| {key} | {_number(final.get(f'{key}/first'))} | {_number(final.get(f'{key}/last'))} |" for key in keys]
    return "\n".join([*lines, "", "All of it: `summary/train.json`; every generation: the `generations/` tables."])


def eval_description(metrics: dict[str, Any], prefix: str) -> str:
    """An Evaluation section of a run's MLflow description (and of its registered version): the
    headline metrics of one evaluation and where the rest is (`prefix`: eval/step-N or eval/base)."""
    shown = [key for key in _EVAL_HEADLINE if metrics.get(key) is not None]
    step = metrics.get("step")
    checkpoint = "the policy before any RL (no checkpoint step)" if step is None else f"step {step}"
    lines = [f"Split {metrics.get('split')}, {checkpoint}.", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| {key} | {_number(metrics[key])} |" for key in shown]
    return "\n".join([*lines, "", f"All metrics: `{prefix}/metrics.json`; every sample: the `eval/samples.json` table."])
