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

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_json
from hackable_rl.training.checkpoint_check import checkpoint_problem

log = logging.getLogger(__name__)


def resume_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "resume"


def permanent_root(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "permanent"


def permanent_steps(run_dir: Path) -> list[int]:
    """The steps of the permanent checkpoints the run holds, in order."""
    return [step for step, _ in permanent_folders(run_dir)]


def permanent_folders(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every permanent checkpoint, in step order. Anything else in that folder (a
    `step-final/` copied in by hand, a stray file) is a UserError naming it: it would otherwise be
    taken for a checkpoint, or break the step order."""
    root = permanent_root(run_dir)
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        step = entry.name.removeprefix("step-")
        if not (entry.name.startswith("step-") and step.isdigit() and entry.is_dir() and not entry.is_symlink()):
            raise UserError(f"{entry}: not a permanent checkpoint of hackable-rl (expected folders step-N only); "
                            "move it out of the run folder")
        found.append((int(step), entry))
    return sorted(found)


def last_resumable(run_dir: Path, before_step: int | None = None) -> tuple[Path, int] | None:
    """The newest *intact* resumable checkpoint (below `before_step` where given) and its step, or None.

    `before_step` is the run's max_steps: a run killed after saving its last step's checkpoint but
    before it finished would, resumed there, train one step past max_steps (the Trainer's loop), so it
    resumes from the checkpoint before and trains the last steps again (same seed, same records).

    A kill during a save leaves a folder without `trainer_state.json` (the Trainer writes it last),
    and a checkpoint can be damaged after it was written (`checkpoint_check`); either is moved to
    `abandoned/resume/`, with one warning line, and the run resumes from the one before: the steps
    after it are abandoned exactly as after a kill.
    """
    for step, candidate in resumable_candidates(run_dir):
        if before_step is not None and step >= before_step:
            continue
        if not (candidate / TRAINER_STATE_NAME).is_file():
            _set_aside(run_dir, candidate, f"has no {TRAINER_STATE_NAME} (killed while saving?)")
            continue
        problem = checkpoint_problem(candidate, step)
        if problem is None:
            return candidate, step
        _set_aside(run_dir, candidate, f"is corrupt ({problem})")
    return None


def resumable_candidates(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every `checkpoint-<step>` folder in the run's resume folder, newest first; read only
    (whether each is intact is `last_resumable`'s to decide)."""
    folder = resume_dir(run_dir)
    if not folder.exists():
        return []
    return sorted(((int(c.name.split("-")[-1]), c) for c in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*")
                   if c.is_dir() and c.name.split("-")[-1].isdigit()), reverse=True)


def _set_aside(run_dir: Path, checkpoint: Path, why: str) -> None:
    destination = run_dir / "abandoned" / "resume" / checkpoint.name
    if destination.exists():
        shutil.rmtree(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(checkpoint), destination)
    log.warning("%s %s; moved to %s, resuming from the checkpoint before it", checkpoint, why, destination)


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
    moved = []
    for folder_step, folder in permanent_folders(run_dir):
        if folder_step > step:
            destination = run_dir / "abandoned" / "permanent" / folder.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), destination)
            moved.append(folder_step)
    return moved
