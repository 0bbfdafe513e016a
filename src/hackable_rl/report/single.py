"""The root pipeline's report: one run, from the DVC metrics folder.

    metrics/warmstart.json    held-out greedy accuracy after the warm start
    metrics/base/eval.json    the base (warm-started) policy under independent evaluation
    metrics/eval.json         the trained policy under independent evaluation
    metrics/train.json        training's first/last-tenth summary
    metrics/train_curve.csv   per-step training metrics
        -> <out>/report.md, headline.png, train_curve.png

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

    @classmethod
    def under(cls, metrics_dir: Path) -> SingleInputs:
        return cls(
            metrics_dir / "warmstart.json", metrics_dir / "base" / "eval.json", metrics_dir / "eval.json",
            metrics_dir / "train.json", metrics_dir / "train_curve.csv",
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


def build_single_report(inputs: SingleInputs, out_dir: Path, title: str) -> Path:
    """Writes report.md and its PNGs into `out_dir`; returns the report path."""
    warm, base, trained = read_json(inputs.warmstart), read_json(inputs.base_eval), read_json(inputs.eval)
    train, curve = read_json(inputs.train), read_curve(inputs.curve)
    headline = {
        "warm start (greedy)": (warm or {}).get("accuracy"),
        "base eval (pass@1)": (base or {}).get("pass_at_1"),
        "trained eval (pass@1)": (trained or {}).get("pass_at_1"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [plots.headline_bars(headline, out_dir / "headline.png")]
    if curve is not None:
        figures.append(plots.training_curve(curve, out_dir / "train_curve.png"))
    report = out_dir / "report.md"
    report.write_text(single_markdown(title, inputs, headline, base, trained, train, figures), encoding="utf-8")
    log.info("report: %s", report)
    return report


_EVAL_ROWS = ("pass_at_1", "observed_reward", "hacking_gap", "false_positive_rate", "false_negative_rate",
              "coverage", "answer_consistency", "thinking_tokens_mean")


def single_markdown(
    title: str, inputs: SingleInputs, headline: dict[str, float | None], base: dict[str, Any] | None,
    trained: dict[str, Any] | None, train: dict[str, Any] | None, figures: list[Path],
) -> str:
    lines = [f"# {title}", "", "## Headline", ""]
    lines += [f"- {name}: {fmt(value)}" for name, value in headline.items()]
    lines += ["", *verdict(headline), "", "## Independent evaluation", "", "| metric | base | trained |", "|---|---|---|"]
    lines += [f"| {key} | {fmt((base or {}).get(key))} | {fmt((trained or {}).get(key))} |" for key in _EVAL_ROWS]
    pass_k = sorted({k for k in {**(base or {}), **(trained or {})} if k.startswith("pass_at_") and k[8:].isdigit()})
    lines += [f"| {key} | {fmt((base or {}).get(key))} | {fmt((trained or {}).get(key))} |" for key in pass_k if key != "pass_at_1"]
    lines += ["", "## Training (sampled on training prompts)", ""]
    lines += _train_lines(train)
    missing = [str(path) for path in vars(inputs).values() if not Path(path).exists()]
    if missing:
        lines += ["", "Missing inputs (their numbers are n/a): " + ", ".join(missing)]
    lines += ["", "## Plots", "", *(f"![{p.stem}]({p.name})" for p in figures), "",
              "The warm-start accuracy is greedy decoding; the evaluations sample n completions per prompt "
              "(evaluation.decoding), so the two are not the same measurement. One run, one seed: no spread.", ""]
    return "\n".join(lines)


def verdict(headline: dict[str, float | None]) -> list[str]:
    """One sentence on whether training moved held-out correctness above the base policy's."""
    base, trained = headline["base eval (pass@1)"], headline["trained eval (pass@1)"]
    if base is None or trained is None:
        return ["Base or trained evaluation is missing: no comparison."]
    diff = trained - base
    if diff > 0:
        return [f"GRPO raised held-out pass@1 from {fmt(base)} to {fmt(trained)} (+{diff:.3f}), one seed."]
    return [f"**GRPO did not raise held-out pass@1**: {fmt(base)} before, {fmt(trained)} after ({diff:+.3f}), one seed."]


def _train_lines(train: dict[str, Any] | None) -> list[str]:
    if train is None:
        return ["No train.json."]
    lines = [f"- steps: {train.get('step')}, seconds: {fmt(train.get('seconds'), 0)}"]
    for key in ("judge/correctness", "reward/observed", "reward/optimised", "hacking_gap"):
        lines.append(f"- {key}: first tenth {fmt(train.get(f'{key}/first'))} -> last tenth {fmt(train.get(f'{key}/last'))}")
    return lines
