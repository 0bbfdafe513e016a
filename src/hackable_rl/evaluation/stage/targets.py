"""What `hackable-rl eval` evaluates: a training run's permanent checkpoint found in MLflow (under
the run's own config, today's evaluation settings), a policy folder, or the configured base policy."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.storage import Storage, folder_name_problem
from hackable_rl.tracking.runs import checkpoint_step, download_run_file, fetch_run, require_client
from hackable_rl.tracking.versions import checkpoint_artifact

__all__ = ["EvalTarget", "target_from_model", "target_from_run"]


@dataclass(frozen=True)
class EvalTarget:
    """What to evaluate: a policy folder (or None: the configured base), under the config of its run."""

    config: ExperimentConfig
    run_name: str
    run_id: str | None
    step: int | None
    policy_path: Path | None


def _run_config(client: Any, run_id: str, current: ExperimentConfig) -> ExperimentConfig:
    """The run's own resolved config (its verifier, model, data), with today's evaluation and storage."""
    with tempfile.TemporaryDirectory() as folder:
        raw = yaml.safe_load(download_run_file(client, run_id, "config.yaml", Path(folder)).read_text())
    raw["evaluation"] = current.evaluation.model_dump(mode="json")
    raw["storage"] = current.storage.model_dump(mode="json")
    raw["tracking"] = current.tracking.model_dump(mode="json") | {"run_name": raw["tracking"]["run_name"]}
    return validate_config(raw, f"MLflow run {run_id} config.yaml")


def target_from_run(current: ExperimentConfig, run_id: str, step: int | None) -> EvalTarget:
    """Finds run `run_id` in MLflow and the permanent checkpoint it logged at `step` (last by default)."""
    client = require_client(current, "`eval --run-id` (or evaluate a folder with --model PATH)")
    run = fetch_run(client, run_id)
    # The run name comes back from MLflow, not from a checked config, and names a folder rewritten
    # below: it must be one folder name (no `/`, no `..`) before anything is downloaded.
    run_name = _checked_name(run.info.run_name, f"--run-id {run_id}: MLflow run name")
    config = _run_config(client, run_id, current)
    step = checkpoint_step(client, run_id, step)
    with tempfile.TemporaryDirectory() as folder:
        local = download_run_file(client, run_id, checkpoint_artifact(step), Path(folder))
        cached = Storage.of(current.storage).eval_dir(run_name) / "policy" / local.name
        _copy_tree(local, cached)
    return EvalTarget(config, run_name, run_id, step, cached)


def _checked_name(name: str, field: str) -> str:
    problem = folder_name_problem(name)
    if problem is not None:
        raise UserError(f"{field}: {name!r} {problem}")
    return name


def _copy_tree(source: Path, target: Path) -> None:
    """Refreshes the cached copy of a checkpoint; an existing folder is replaced only when it is such
    a copy (it holds the checkpoint.json every permanent checkpoint has), never anything else."""
    if target.exists() or target.is_symlink():
        if target.is_symlink() or not (target / "checkpoint.json").is_file():
            raise UserError(f"{target}: exists but is no cached checkpoint (no checkpoint.json); left untouched")
        shutil.rmtree(target)
    shutil.copytree(source, target)


def target_from_model(current: ExperimentConfig, model_path: Path | None) -> EvalTarget:
    """A policy without a training run: a folder, or (None) the configured base policy itself."""
    name = f"eval-{model_path.name if model_path else current.model.source}-{current.data.name}"
    return EvalTarget(current, name, None, None, model_path)
