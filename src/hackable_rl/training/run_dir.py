"""The run folder `runs/<run>/`: opened fresh or at its resume point, and never deleted unless
this project made it.

    run.json     `"created_by": "hackable-rl"` from the moment the folder exists, then the run's identity,
                 MLflow run id, status and the permanent checkpoints MLflow holds (`training.run`)
    config.yaml  the resolved config; after a resume under a changed config the old one is kept as
                 config.before-step-K.yaml and the change is recorded in run.json and an MLflow tag
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json, write_json
from hackable_rl.core.run_lock import LOCK_NAME
from hackable_rl.models.sources import warm_start_fingerprint
from hackable_rl.tracking import Tracker
from hackable_rl.training.checkpoints import last_resumable, permanent_folders, resume_dir
from hackable_rl.training.resume_guard import ResumeChanges, change_record, change_tag, check_resume_config

log = logging.getLogger(__name__)

Resume = Literal["never", "auto"]


# The marker that makes a folder this project's: run.json with `"created_by": "hackable-rl"`, written
# the moment the folder is created. `train --overwrite` deletes a folder only when it carries it.
CREATED_BY = {"created_by": "hackable-rl"}


@dataclass(frozen=True)
class RunStart:
    """Where a run starts: fresh (step None) or from a resumable checkpoint, under which changes."""

    info: dict[str, Any]
    step: int | None = None
    checkpoint: Path | None = None
    changes: ResumeChanges = ResumeChanges([], [])


def read_run_info(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.is_file():
        raise UserError(f"{run_dir}: no run.json; is this a training run folder? (train first: `hackable-rl train`)")
    info = read_json(path)  # not UTF-8 or not JSON: a UserError naming the file and line
    if not isinstance(info, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(info).__name__}; not a run.json of hackable-rl")
    return info


# The run.json fields a resume reads, with the JSON types they must have (a hand edit that turns
# `final_step` into a string would otherwise end the resume in a traceback).
_RUN_INFO_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "final_step": (int,),
    "mlflow_run_id": (str, type(None)),
    "checkpoint_artifacts": (dict, type(None)),
    "config_changes": (list,),
    "tracking_pending": (bool,),
}
_JSON_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "a list", bool: "true or false"}


def checked_run_info(run_dir: Path) -> dict[str, Any]:
    """run.json, each field a resume reads checked for its type; a wrong one is a UserError naming
    the file and the field."""
    info = read_run_info(run_dir)
    for key, types in _RUN_INFO_TYPES.items():
        value = info.get(key)
        if key in info and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            expected = " or ".join("null" if t is type(None) else _JSON_NAMES[t] for t in types)
            raise UserError(f"{run_dir / 'run.json'}: field {key!r} is {json.dumps(value)}, expected {expected}; "
                            "edited by hand? restore it, or start again with --overwrite")
    return info


def created_by_project(run_dir: Path, info: dict[str, Any]) -> bool:
    """Whether run.json says hackable-rl made this folder: the marker, or (runs from before the
    marker existed) a training run.json that names this very folder and its config hash."""
    if info.get("created_by") == CREATED_BY["created_by"]:
        return True
    return info.get("kind") == "train" and info.get("run_name") == run_dir.name and "config_hash" in info


def open_run_dir(
    run_dir: Path, config: ExperimentConfig, resume: Resume, overwrite: bool, allow_change: bool
) -> RunStart:
    """A fresh run folder, or the resume point of the existing run under the config guard."""
    if resume == "auto" and (run_dir / "run.json").exists():
        info = checked_run_info(run_dir)
        permanent_folders(run_dir)  # a stray folder there is refused before anything moves
        changes = check_resume_config(run_dir, config, allow_change)
        check_same_warm_start(run_dir, info, config)
        if info.get("status") == "finished" and info.get("final_step", 0) >= config.trainer.max_steps:
            # the Trainer, resumed at its last step, would train one step past max_steps
            raise UserError(f"{run_dir}: finished at step {info['final_step']} of {config.trainer.max_steps}; "
                            "--resume auto has nothing to continue (start again with --overwrite)")
        checkpoint = last_resumable(run_dir, before_step=config.trainer.max_steps)
        if checkpoint is None:
            raise UserError(
                f"{run_dir}: --resume auto found no resumable checkpoint in {resume_dir(run_dir)}; "
                "start again with --overwrite"
            )
        return RunStart(info, checkpoint[1], checkpoint[0], changes)
    make_room(run_dir, overwrite)
    return RunStart(create_run_dir(run_dir, config))


def make_room(run_dir: Path, overwrite: bool) -> None:
    """Clears the way for a fresh run. Only a folder this project created is ever deleted, and only
    with --overwrite; an empty folder is used as it is; anything else is the user's and is refused.
    The writer lock (`run_lock`) is kept: deleting it would let a second writer in."""
    if not run_dir.exists() and not run_dir.is_symlink():
        return
    refuse_foreign(run_dir)
    if not _entries(run_dir):
        return
    if not overwrite:
        raise UserError(
            f"{run_dir}: a run with this name exists; continue it with --resume auto, start again with "
            "--overwrite, or set tracking.run_name"
        )
    for entry in _entries(run_dir):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _entries(run_dir: Path) -> list[Path]:
    """What the folder holds besides its writer lock."""
    return [entry for entry in run_dir.iterdir() if entry.name != LOCK_NAME]


def refuse_foreign(run_dir: Path) -> None:
    """A UserError for an existing path at `run_dir` that is not a run folder this project created
    (a file, a symlink, a folder of someone else's): it is left untouched, no lock file added."""
    if not run_dir.exists() and not run_dir.is_symlink():
        return
    if run_dir.is_dir() and not run_dir.is_symlink() and not _entries(run_dir):
        return
    if not (run_dir / "run.json").is_file() or run_dir.is_symlink():
        raise UserError(
            f"{run_dir}: exists but holds no run.json written by hackable-rl; it is left untouched "
            "(move it away or choose another tracking.run_name)"
        )
    if not created_by_project(run_dir, read_run_info(run_dir)):
        raise UserError(
            f"{run_dir / 'run.json'}: not written by hackable-rl (no \"created_by\": \"hackable-rl\"); "
            "the folder is left untouched (move it away or choose another tracking.run_name)"
        )


def create_run_dir(run_dir: Path, config: ExperimentConfig) -> dict[str, Any]:
    """Creates the folder and marks it at once (run.json, config.yaml), so that a run killed while
    loading the model still leaves a folder `--overwrite` may delete and `--resume` may check."""
    run_dir.mkdir(parents=True, exist_ok=True)
    info = {**CREATED_BY, "run_name": config.run_name, "kind": "train", "status": "starting",
            "warm_start": warm_start_fingerprint(config)}
    write_json(run_dir / "run.json", info)
    write_config(run_dir / "config.yaml", config)
    return info


def check_same_warm_start(run_dir: Path, info: dict[str, Any], config: ExperimentConfig) -> None:
    """Refuses a resume whose warm start differs, by content, from the one the run began on (a warm start
    made again on another machine, or from another recipe): its steps would continue another policy.
    A run folder from before the record has nothing to compare."""
    if "warm_start" not in info:
        return
    now = warm_start_fingerprint(config)
    if now != info["warm_start"]:
        raise UserError(f"{run_dir / 'run.json'}: warm start: was {_described(info['warm_start'])}, now "
                        f"{_described(now)}; --resume auto continues a run only from the warm start it began on "
                        "(restore it, or start again with --overwrite)")


def _described(fingerprint: dict[str, str] | None) -> str:
    return "none" if fingerprint is None else f"{fingerprint['folder']} sha256 {fingerprint['sha256'][:12]}"


def write_config(path: Path, config: ExperimentConfig) -> None:
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))


def record_config_change(
    run_dir: Path, config: ExperimentConfig, tracker: Tracker, start: RunStart
) -> list[dict[str, Any]]:
    """After a resume under a changed config: config.yaml becomes the new config (the old one is kept
    beside it), and the change goes into an MLflow tag; returns run.json's updated `config_changes`."""
    previous = run_dir / f"config.before-step-{start.step}.yaml"
    for attempt in range(2, 1000):  # a second resume from the same step keeps the first one's file
        if not previous.exists():
            break
        previous = run_dir / f"config.before-step-{start.step}.{attempt}.yaml"
    if (run_dir / "config.yaml").is_file():
        (run_dir / "config.yaml").replace(previous)
        tracker.log_artifact(previous)
    write_config(run_dir / "config.yaml", config)
    tracker.log_artifact(run_dir / "config.yaml")
    tracker.set_tags({f"config_change.step-{start.step}": change_tag(start.changes)})
    level = logging.WARNING if start.changes.refused else logging.INFO
    log.log(level, "resuming %s from step %d under a changed config: %s", run_dir, start.step, change_tag(start.changes))
    return [*start.info.get("config_changes", []), change_record(start.step, start.changes)]
