"""Reading finished runs back from MLflow: the run, its files, its registered checkpoints."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.store import masked_uri
from hackable_rl.tracking.tracker import make_client

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
    from mlflow.exceptions import MlflowException

    check_run_id(run_id)
    try:
        return client.get_run(run_id)
    except MlflowException:
        raise UserError(f"--run-id {run_id}: no such run in {masked_uri(client.tracking_uri)}") from None


def download_run_file(client: Any, run_id: str, artifact_path: str, folder: Path) -> Path:
    """Downloads one artifact (file or folder) of a run into `folder`; returns its local path."""
    from mlflow.exceptions import MlflowException

    try:
        return Path(client.download_artifacts(run_id, artifact_path, str(folder)))
    except (MlflowException, OSError) as error:
        raise UserError(f"run {run_id}: cannot read artifact {artifact_path!r} ({error})") from None


def artifact_path_of(source: str, run: Any) -> str:
    """The artifact path of a registered version's `source` inside its run."""
    prefix = run.info.artifact_uri.rstrip("/") + "/"
    if not source.startswith(prefix):
        raise UserError(f"model version source {source} is not an artifact of run {run.info.run_id}")
    return source[len(prefix) :]
