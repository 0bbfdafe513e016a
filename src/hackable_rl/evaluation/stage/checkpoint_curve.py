"""A condition's learning curve on its evaluation split: each permanent checkpoint that
`evaluation.checkpoint_steps` names, evaluated as the final one is (the same prompts, samples per
prompt and seeds), so a pilot can read "how far had it moved by step N" without training again.

Beside condition.json it writes `checkpoints.csv` (one row per step: pass@1 under both judges, pass@k,
greedy accuracy) and `checkpoints/step-<N>/prompts.jsonl` (each step's per-prompt results, which a
paired comparison against the base reads). The final step's row is the condition's own evaluation.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.storage import Storage
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE
from hackable_rl.evaluation.stage.evaluate import evaluate
from hackable_rl.evaluation.stage.targets import EvalTarget

__all__ = ["CHECKPOINTS_FILE", "CHECKPOINTS_FOLDER", "CURVE_METRICS", "evaluate_checkpoints", "step_folder"]

CHECKPOINTS_FILE = "checkpoints.csv"
CHECKPOINTS_FOLDER = "checkpoints"
CURVE_METRICS = ("pass_at_1", "transfer_pass_at_1", "greedy_accuracy", "pass_at_2", "pass_at_4", "n_prompts",
                 "n_samples")
"""The columns of checkpoints.csv after `step` (a metric the evaluation did not compute is left empty)."""


def step_folder(out_dir: Path, step: int) -> Path:
    """Where a checkpoint's per-prompt results go beside condition.json."""
    return out_dir / CHECKPOINTS_FOLDER / f"step-{step}"


def evaluate_checkpoints(cfg: ExperimentConfig, record: dict[str, Any], out_dir: Path) -> list[dict[str, Any]]:
    """Evaluates every `evaluation.checkpoint_steps` checkpoint before the final one, adds the final
    evaluation already in `record`, writes checkpoints.csv and each step's prompts.jsonl; returns the rows."""
    final_step = record["eval"]["step"]
    storage = Storage.of(cfg.storage)
    rows = []
    for step in sorted(set(cfg.evaluation.checkpoint_steps) - {final_step}):
        if step > final_step:
            continue  # a run stopped early has no later checkpoint
        checkpoint = storage.permanent_checkpoint(cfg.run_name, step)
        result = evaluate(EvalTarget(cfg, cfg.run_name, record.get("run_id"), step, checkpoint))
        rows.append(_row(step, result.metrics))
        _keep_prompts(result.out_dir / PROMPTS_FILE, step_folder(out_dir, step))
    rows.append(_row(final_step, record["eval"]))
    _keep_prompts(Path(record["eval_dir"]) / PROMPTS_FILE, step_folder(out_dir, final_step))
    pd.DataFrame(rows, columns=["step", *CURVE_METRICS]).to_csv(out_dir / CHECKPOINTS_FILE, index=False)
    return rows


def _row(step: int, metrics: dict[str, Any]) -> dict[str, Any]:
    return {"step": step} | {name: metrics.get(name) for name in CURVE_METRICS}


def _keep_prompts(source: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, folder / PROMPTS_FILE)
