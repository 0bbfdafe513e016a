"""Permanent checkpoints: `runs/<run>/checkpoints/permanent/step-N/` (adapter or full model, safetensors,
tokenizer, checkpoint.json). Resumable ones are TRL's own `checkpoints/resume/checkpoint-N/`."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from transformers.trainer_utils import get_last_checkpoint

from hackable_rl.jsonl import write_json


def resume_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "resume"


def permanent_root(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "permanent"


def last_resumable(run_dir: Path) -> tuple[Path, int] | None:
    """The newest resumable checkpoint and its step, or None."""
    folder = resume_dir(run_dir)
    if not folder.exists():
        return None
    last = get_last_checkpoint(str(folder))
    if last is None:
        return None
    return Path(last), int(Path(last).name.split("-")[-1])


def save_permanent(
    model: Any, tokenizer: Any, run_dir: Path, step: int, metrics: dict[str, Any], config_hash: str, base: str
) -> Path:
    """Saves the policy at `step` (a PEFT model saves its adapter only) with what evaluation needs."""
    target = permanent_root(run_dir) / f"step-{step}"
    if target.exists():
        shutil.rmtree(target)
    model.save_pretrained(str(target), safe_serialization=True)
    tokenizer.save_pretrained(str(target))
    write_json(
        target / "checkpoint.json",
        {"step": step, "metrics": metrics, "config_hash": config_hash, "base_model": base, "saved_at": time.time()},
    )
    return target


def abandon_permanent_after(run_dir: Path, step: int) -> list[int]:
    """On resume from `step`: permanent checkpoints of later steps belong to the abandoned trajectory."""
    root = permanent_root(run_dir)
    moved = []
    for folder in sorted(root.glob("step-*")) if root.exists() else []:
        folder_step = int(folder.name.split("-")[1])
        if folder_step > step:
            destination = run_dir / "abandoned" / "permanent" / folder.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), destination)
            moved.append(folder_step)
    return moved
