"""The resume guard: `train --resume auto` continues a run only under the config it started with.

A run killed at step 7 and resumed with another `corruption.rate` would train steps 7.. on a
different verifier while its config.yaml and MLflow params describe the first one: a silently mixed
run. So a resume compares the run folder's `config.yaml` with the new config, key by key
(`flatten_config` keys, such as `corruption.rate`), and refuses any difference, except in keys that
change where a run is stored, logged, evaluated or reported, or how long it goes on, never what a
step trains on:

- `tracking.*`, `storage.*`, `evaluation.*`, `report.*`: read by other stages or by bookkeeping only;
- `trainer.save_steps`, `trainer.permanent_steps`: which checkpoints are written and kept;
- `trainer.progress_steps`: how often the console prints a progress line;
- `torch_threads`: how many CPU threads compute the same steps;
- `trainer.max_steps`, when the learning rate does not depend on it (scheduler `constant` and
  `warmup_ratio` 0); with a decaying schedule or warm-up a new horizon changes the rate of every
  remaining step, so it is a difference like any other.

`--allow-config-change` resumes anyway; the run then records what changed (run.json
`config_changes`, an MLflow tag `config_change.step-K`) and config.yaml becomes the new config
(the previous one is kept as `config.before-step-K.yaml`). Except for the policy's shape and source
(`model.source`, `model.revision`, `model.tiny.*`, `lora.enabled`, `lora.r`, `lora.target_modules`):
the checkpoint holds weights of the old shape, so such a change could never take effect, and it is
refused even with the flag rather than recorded as if it had.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.errors import UserError

MAY_CHANGE_SECTIONS = ("tracking.", "storage.", "evaluation.", "report.", "alarm.")
MAY_CHANGE_KEYS = frozenset(
    {"trainer.save_steps", "trainer.permanent_steps", "trainer.progress_steps", "torch_threads"}
)
_ABSENT = "<absent>"
# What the checkpoint's weights fix: a resume cannot change them, with or without the flag.
NEVER_CHANGE_SECTIONS = ("model.tiny.",)
NEVER_CHANGE_KEYS = frozenset({"model.source", "model.revision", "lora.enabled", "lora.r", "lora.target_modules"})


@dataclass(frozen=True)
class ConfigChange:
    """One key whose value differs between the run's saved config and the resuming one."""

    key: str
    was: Any
    now: Any

    def describe(self) -> str:
        return f"{self.key}: was {_text(self.was)}, now {_text(self.now)}"


@dataclass(frozen=True)
class ResumeChanges:
    """What differs on a resume: `refused` needs --allow-config-change, `allowed` never does."""

    refused: list[ConfigChange]
    allowed: list[ConfigChange]

    @property
    def any(self) -> bool:
        return bool(self.refused or self.allowed)


def _text(value: Any) -> str:
    return value if value == _ABSENT else json.dumps(value)


def _may_change(key: str, new: Mapping[str, Any]) -> bool:
    if key.startswith(MAY_CHANGE_SECTIONS) or key in MAY_CHANGE_KEYS:
        return True
    if key == "trainer.max_steps":  # only when the learning-rate schedule does not depend on it
        return new.get("trainer.scheduler") == "constant" and new.get("trainer.warmup_ratio") == 0
    return False


def compare_configs(saved: Mapping[str, Any], new: Mapping[str, Any]) -> ResumeChanges:
    """Differences between two flattened configs, split into refused and allowed ones."""
    refused, allowed = [], []
    for key in sorted(set(saved) | set(new)):
        was, now = saved.get(key, _ABSENT), new.get(key, _ABSENT)
        if was == now:
            continue
        change = ConfigChange(key, was, now)
        (allowed if _may_change(key, new) else refused).append(change)
    return ResumeChanges(refused, allowed)


def read_saved_config(run_dir: Path) -> dict[str, Any]:
    """The run's config.yaml, flattened; a missing or unreadable file is a UserError naming it."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise UserError(
            f"{path}: missing, so --resume auto cannot check that the config is unchanged; "
            "pass --allow-config-change to resume anyway"
        )
    try:
        saved = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: not a readable config ({error.__class__.__name__}); edited by hand?") from None
    if not isinstance(saved, dict):
        raise UserError(f"{path}: expected a mapping of config sections, got {type(saved).__name__}")
    return flatten_config(saved)


def check_resume_config(run_dir: Path, config: ExperimentConfig, allow_change: bool) -> ResumeChanges:
    """Refuses (UserError, one line per differing key) a resume under a changed config, unless
    `allow_change`; returns every difference so the caller can record it."""
    new = flatten_config(config)
    try:
        saved = read_saved_config(run_dir)
    except UserError:
        if not allow_change:
            raise
        return ResumeChanges([ConfigChange("config.yaml", _ABSENT, "unknown")], [])
    changes = compare_configs(saved, new)
    fixed = [c for c in changes.refused if c.key.startswith(NEVER_CHANGE_SECTIONS) or c.key in NEVER_CHANGE_KEYS]
    if fixed:
        raise UserError(*(
            f"{run_dir / 'config.yaml'}: {change.describe()}; the checkpoint holds the policy of the old "
            "shape and source, so no resume can apply this (not even --allow-config-change): undo it or start a new run"
            for change in fixed
        ))
    if changes.refused and not allow_change:
        raise UserError(
            *(f"{run_dir / 'config.yaml'}: {change.describe()}" for change in changes.refused),
            f"{run_dir}: --resume auto continues a run only under its own config; undo the change, start "
            "a new run (--overwrite or another tracking.run_name), or resume anyway with "
            "--allow-config-change (recorded in run.json and as an MLflow tag)",
        )
    return changes


def change_record(step: int, changes: ResumeChanges) -> dict[str, Any]:
    """The run.json entry of one resume under a changed config."""
    return {
        "resumed_from_step": step,
        "forced": {c.key: {"was": c.was, "now": c.now} for c in changes.refused},
        "allowed": {c.key: {"was": c.was, "now": c.now} for c in changes.allowed},
    }


def change_tag(changes: ResumeChanges) -> str:
    """The MLflow tag value: every difference, forced ones first."""
    forced = [f"{c.describe()} (forced)" for c in changes.refused]
    return "; ".join(forced + [c.describe() for c in changes.allowed])
