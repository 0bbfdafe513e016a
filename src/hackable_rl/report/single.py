"""The root pipeline's report: one run and its clean reference, from the DVC metrics folder.

    metrics/warmstart.json          held-out greedy accuracy after the warm start
    metrics/base/eval.json          the base (warm-started) policy under independent evaluation
    metrics/clean/eval.json         the clean reference: the same GRPO at corruption.rate 0
    metrics/eval.json               the trained policy (the configured corruption) under independent evaluation
    metrics/[clean/]train.json      training's first/last-tenth summary
    metrics/[clean/]train_curve.csv per-step training metrics
        -> <out>/report.md, headline.png, train_curve.png, clean_train_curve.png

A missing file is reported as missing in report.md (a partial pipeline still gets a report).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.errors import UserError
from hackable_rl.report import plots
from hackable_rl.report.study import fmt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SingleInputs:
    """Where the root pipeline's metrics live (all under one metrics folder by default)."""

    warmstart: Path
    base_eval: Path
    eval: Path
    train: Path
    curve: Path
    clean_eval: Path
    clean_train: Path
    clean_curve: Path

    @classmethod
    def under(cls, metrics_dir: Path) -> SingleInputs:
        clean = metrics_dir / "clean"
        return cls(
            metrics_dir / "warmstart.json", metrics_dir / "base" / "eval.json", metrics_dir / "eval.json",
            metrics_dir / "train.json", metrics_dir / "train_curve.csv",
            clean / "eval.json", clean / "train.json", clean / "train_curve.csv",
        )


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's mapping, or None when it does not exist (the report says so)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object of metrics")
    return data


def read_curve(path: Path) -> pd.DataFrame | None:
    if not path.exists():
        return None
    curve = pd.read_csv(path)
    if "step" not in curve.columns:
        raise UserError(f"{path}: expected a `step` column (written by `hackable-rl train --metrics-dir`)")
    return curve


BASE, CLEAN, TRAINED = "base eval (pass@1)", "clean-trained eval (pass@1)", "trained eval (pass@1)"


def build_single_report(inputs: SingleInputs, out_dir: Path, title: str) -> Path:
    """Writes report.md and its PNGs into `out_dir`; returns the report path."""
    warm, base, trained = read_json(inputs.warmstart), read_json(inputs.base_eval), read_json(inputs.eval)
    clean = read_json(inputs.clean_eval)
    headline = {
        "warm start (greedy)": (warm or {}).get("accuracy"),
        BASE: (base or {}).get("pass_at_1"),
        CLEAN: (clean or {}).get("pass_at_1"),
        TRAINED: (trained or {}).get("pass_at_1"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [plots.headline_bars(headline, out_dir / "headline.png")]
    for curve_path, name in ((inputs.curve, "train_curve.png"), (inputs.clean_curve, "clean_train_curve.png")):
        curve = read_curve(curve_path)
        if curve is not None:
            figures.append(plots.training_curve(curve, out_dir / name))
    evals = {"base": base, "clean-trained": clean, "trained": trained}
    trains = {"trained": read_json(inputs.train), "clean-trained": read_json(inputs.clean_train)}
    report = out_dir / "report.md"
    report.write_text(single_markdown(title, inputs, headline, evals, trains, figures), encoding="utf-8")
    log.info("report: %s", report)
    return report


_EVAL_ROWS = ("pass_at_1", "observed_reward", "hacking_gap", "false_positive_rate", "false_negative_rate",
              "coverage", "answer_consistency", "thinking_tokens_mean")


def single_markdown(
    title: str, inputs: SingleInputs, headline: dict[str, float | None], evals: dict[str, dict[str, Any] | None],
    trains: dict[str, dict[str, Any] | None], figures: list[Path],
) -> str:
    lines = [f"# {title}", "", "## Headline", ""]
    lines += [f"- {name}: {fmt(value)}" for name, value in headline.items()]
    lines += ["", *verdict(headline), "", "## Independent evaluation", ""]
    lines += ["| metric | " + " | ".join(evals) + " |", "|---|" + "---|" * len(evals)]
    present = [metrics or {} for metrics in evals.values()]
    pass_k = sorted({k for m in present for k in m if k.startswith("pass_at_") and k[8:].isdigit()} - {"pass_at_1"})
    for key in (*_EVAL_ROWS, *pass_k):
        lines.append(f"| {key} | " + " | ".join(fmt(m.get(key)) for m in present) + " |")
    lines += ["", "The clean-trained run is the same GRPO with an uncorrupted verifier (corruption.rate 0): what "
              "training can teach at all, the bar the corrupted run is read against.", ""]
    for name, train in trains.items():
        lines += [f"## Training: {name} (sampled on training prompts)", "", *_train_lines(train), ""]
    missing = [str(path) for path in vars(inputs).values() if not Path(path).exists()]
    if missing:
        lines += ["Missing inputs (their numbers are n/a): " + ", ".join(missing), ""]
    lines += ["## Plots", "", *(f"![{p.stem}]({p.name})" for p in figures), "",
              "The warm-start accuracy is greedy decoding; the evaluations sample n completions per prompt "
              "(evaluation.decoding), so the two are not the same measurement. One run, one seed: no spread.", ""]
    return "\n".join(lines)


def verdict(headline: dict[str, float | None]) -> list[str]:
    """One sentence each: did clean training, and did the configured (corrupted) training, move
    held-out correctness above the base policy's?"""
    base = headline[BASE]
    sentences = []
    for name, label in ((CLEAN, "GRPO with a clean verifier"), (TRAINED, "GRPO with the configured verifier")):
        trained = headline[name]
        if base is None or trained is None:
            sentences.append(f"{label}: base or trained evaluation is missing, no comparison.")
            continue
        diff = trained - base
        if diff > 0:
            sentences.append(f"{label} raised held-out pass@1 from {fmt(base)} to {fmt(trained)} (+{diff:.3f}), one seed.")
        else:
            sentences.append(
                f"**{label} did not raise held-out pass@1**: {fmt(base)} before, {fmt(trained)} after ({diff:+.3f}), one seed."
            )
    return [f"- {sentence}" for sentence in sentences]


def _train_lines(train: dict[str, Any] | None) -> list[str]:
    if train is None:
        return ["No train.json."]
    lines = [f"- steps: {train.get('step')}, seconds: {fmt(train.get('seconds'), 0)}"]
    for key in ("judge/correctness", "reward/observed", "reward/optimised", "hacking_gap"):
        lines.append(f"- {key}: first tenth {fmt(train.get(f'{key}/first'))} -> last tenth {fmt(train.get(f'{key}/last'))}")
    return lines
