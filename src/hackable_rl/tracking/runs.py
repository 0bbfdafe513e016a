"""Reading finished runs back from MLflow: the run, its files, its permanent checkpoints."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.opening import make_client
from hackable_rl.tracking.store import masked_uri
from hackable_rl.tracking.versions import (
    PERMANENT_ARTIFACTS,
    VERSION_FILE,
    CheckpointVersion,
    artifact_step,
    checkpoint_artifact,
)

# An MLflow run id: 32 hex digits in the stores MLflow makes; letters, digits, `_` and `-` in general.
# Anything else (a quote, a space) would break the store's search filter with a traceback.
_RUN_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def check_run_id(run_id: str) -> None:
    if not _RUN_ID.fullmatch(run_id):
        raise UserError(f"--run-id {run_id!r}: not an MLflow run id (expected 32 hex digits, as the MLflow UI shows)")


def require_client(config: Any, purpose: str) -> Any:
    """An MlflowClient, or a UserError naming the unreachable store and what needed it."""
    client, uri = make_client(config.storage.cache_dir)
    if client is None:
        raise UserError(f"MLflow store {masked_uri(uri)} is unreachable; {purpose} needs it")
    return client


def fetch_run(client: Any, run_id: str) -> Any:
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    check_run_id(run_id)
    try:
        return client.get_run(run_id)
    except MlflowException:
        raise UserError(f"--run-id {run_id}: no such run in {masked_uri(client.tracking_uri)}") from None


def download_run_file(client: Any, run_id: str, artifact_path: str, folder: Path) -> Path:
    """Downloads one artifact (file or folder) of a run into `folder`; returns its local path."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    try:
        return Path(client.download_artifacts(run_id, artifact_path, str(folder)))
    except (MlflowException, OSError) as error:
        raise UserError(f"run {run_id}: cannot read artifact {artifact_path!r} ({error})") from None


def checkpoint_steps(client: Any, run_id: str) -> list[int]:
    """Steps of the permanent checkpoints the run logged (`checkpoints/permanent/step-N`), ascending."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    try:
        listed = client.list_artifacts(run_id, PERMANENT_ARTIFACTS)
    except (MlflowException, OSError) as error:
        raise UserError(f"run {run_id}: cannot list its artifacts {PERMANENT_ARTIFACTS!r} ({error})") from None
    steps = sorted(step for entry in listed if entry.is_dir and (step := artifact_step(entry.path)) is not None)
    if not steps:
        raise UserError(f"run {run_id}: no permanent checkpoint in its artifacts {PERMANENT_ARTIFACTS!r} (did training "
                        "finish a checkpoint? a run trained offline needs `hackable-rl sync RUN_DIR` first)")
    return steps


def checkpoint_step(client: Any, run_id: str, step: int | None) -> int:
    """`step` when the run logged a permanent checkpoint there; its last checkpoint's step when None."""
    steps = checkpoint_steps(client, run_id)
    if step is None:
        return steps[-1]
    if step not in steps:
        raise UserError(f"run {run_id}: no permanent checkpoint at step {step}; its checkpoints: steps {steps}")
    return step


def read_checkpoint_version(client: Any, run_id: str, step: int) -> CheckpointVersion:
    """The version the run's checkpoint at `step` becomes once registered (its `version.json`)."""
    artifact = f"{checkpoint_artifact(step)}/{VERSION_FILE}"
    with tempfile.TemporaryDirectory() as folder:
        path = download_run_file(client, run_id, artifact, Path(folder))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise UserError(f"run {run_id}: artifact {artifact} is not JSON ({error})") from None
    return CheckpointVersion.from_json(data, f"run {run_id}: artifact {artifact}")
