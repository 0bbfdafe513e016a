"""Permanent checkpoints: `runs/<run>/checkpoints/permanent/step-N/` (adapter or full model, safetensors,
tokenizer, checkpoint.json). Resumable ones are TRL's own `checkpoints/resume/checkpoint-N/`."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from hackable_rl.jsonl import write_json

log = logging.getLogger(__name__)


def resume_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "resume"


def permanent_root(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "permanent"


def permanent_steps(run_dir: Path) -> list[int]:
    """The steps of the permanent checkpoints the run holds, in order."""
    return sorted(int(folder.name.split("-")[1]) for folder in permanent_root(run_dir).glob("step-*"))


def last_resumable(run_dir: Path) -> tuple[Path, int] | None:
    """The newest *complete* resumable checkpoint and its step, or None.

    A kill during a save leaves a folder without `trainer_state.json` (the Trainer writes it last);
    such a folder is moved to `abandoned/resume/` so that the run resumes from the previous one.
    """
    folder = resume_dir(run_dir)
    if not folder.exists():
        return None
    complete = []
    for candidate in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
        if not candidate.is_dir() or not candidate.name.split("-")[-1].isdigit():
            continue
        if (candidate / TRAINER_STATE_NAME).is_file():
            complete.append((int(candidate.name.split("-")[-1]), candidate))
        else:
            _set_aside_incomplete(run_dir, candidate)
    if not complete:
        return None
    step, last = max(complete)
    return last, step


def _set_aside_incomplete(run_dir: Path, checkpoint: Path) -> None:
    destination = run_dir / "abandoned" / "resume" / checkpoint.name
    if destination.exists():
        shutil.rmtree(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(checkpoint), destination)
    log.warning("%s has no %s (killed while saving?); moved to %s", checkpoint, TRAINER_STATE_NAME, destination)


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
