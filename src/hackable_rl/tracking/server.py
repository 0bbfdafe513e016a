"""`hackable-rl ui`: the MLflow UI over this project's store, on 127.0.0.1 only."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

from hackable_rl.errors import UserError
from hackable_rl.tracking.store import artifact_root, tracking_uri

log = logging.getLogger(__name__)


def ui_command(config: Any, port: int) -> list[str]:
    uri = tracking_uri(config.storage.cache_dir)
    if uri.startswith(("http://", "https://")):
        raise UserError(f"MLFLOW_TRACKING_URI is a server ({uri}); open it in a browser instead of `hackable-rl ui`")
    return [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--default-artifact-root", artifact_root(config.storage.cache_dir).as_uri(),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]


def serve_ui(config: Any, port: int) -> None:
    """Runs the MLflow server in the foreground until Ctrl-C."""
    command = ui_command(config, port)
    log.info("MLflow UI on http://127.0.0.1:%d (store %s); Ctrl-C stops it", port, command[5])
    try:
        subprocess.run(command, check=False, env={**os.environ})
    except KeyboardInterrupt:
        log.info("stopped")
