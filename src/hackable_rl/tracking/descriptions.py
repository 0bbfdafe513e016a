"""The sections of a run's MLflow description (and of a registered version's): what a training run
did and what an evaluation measured, as markdown tables of the headline numbers. No torch."""

from __future__ import annotations

from typing import Any

__all__ = ["EVAL_HEADLINE", "eval_description", "shown_number", "train_description"]

# The eval metrics printed first, in this order; pass@k for the other k follow.
EVAL_HEADLINE = (
    "n_prompts", "n_samples", "pass_at_1", "greedy_accuracy", "hacking_gap", "observed_reward", "coverage",
    "false_positive_rate", "false_negative_rate",
)


def shown_number(value: Any) -> Any:
    if value is None:
        return ""
    return round(value, 4) if isinstance(value, float) else value


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
    lines += [f"| {key} | {shown_number(final.get(f'{key}/first'))} | {shown_number(final.get(f'{key}/last'))} |" for key in keys]
    return "\n".join([*lines, "", "All of it: `summary/train.json`; every generation: the `generations/` tables."])


def eval_description(metrics: dict[str, Any], prefix: str) -> str:
    """An Evaluation section of a run's MLflow description (and of its registered version): the
    headline metrics of one evaluation and where the rest is (`prefix`: eval/step-N or eval/base)."""
    shown = [key for key in EVAL_HEADLINE if metrics.get(key) is not None]
    step = metrics.get("step")
    checkpoint = "the policy before any RL (no checkpoint step)" if step is None else f"step {step}"
    lines = [f"Split {metrics.get('split')}, {checkpoint}.", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| {key} | {shown_number(metrics[key])} |" for key in shown]
    return "\n".join([*lines, "", f"All metrics: `{prefix}/metrics.json`; every sample: the `eval/samples.json` table."])
