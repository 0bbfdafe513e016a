"""`hackable-rl ui`: the MLflow UI over this project's store, on 127.0.0.1 only."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.store import artifact_root, masked_uri, tracking_uri
from hackable_rl.tracking.views import runs_view_query

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def ui_command(config: Any, port: int) -> list[str]:
    uri = tracking_uri(config.storage.cache_dir)
    if uri.startswith(("http://", "https://")):
        raise UserError(f"MLFLOW_TRACKING_URI is a server ({masked_uri(uri)}); open it in a browser instead of `hackable-rl ui`")
    return [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--default-artifact-root", artifact_root(config.storage.cache_dir).as_uri(),
        "--host", HOST, "--port", str(port), "--workers", "1",
    ]


def check_port_free(port: int) -> None:
    """A UserError (one line, exit 2) for a port outside 1..65535, or when something already listens
    on it: MLflow would only log "address already in use" and hang."""
    if not 1 <= port <= 65535:
        raise UserError(f"--port: {port} is not in [1, 65535]")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
        try:
            probe.bind((HOST, port))
        except OSError:
            raise UserError(
                f"--port {port}: {HOST}:{port} is already in use (another `hackable-rl ui`?); "
                "stop it or pass another --port"
            ) from None


def ui_urls(config: Any, port: int) -> dict[str, str]:
    """The pages `hackable-rl ui` announces: the configured experiment's runs table, with the headline
    columns (`tracking/views.py`), and its traces (one per training step, `tracking/traces.py`); the
    UI's home page when the experiment does not exist yet."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow import MlflowClient

    home = f"http://{HOST}:{port}/"
    experiment = MlflowClient(tracking_uri(config.storage.cache_dir)).get_experiment_by_name(
        config.tracking.experiment_name
    )
    if experiment is None:
        return {"runs": home}
    page = f"{home}#/experiments/{experiment.experiment_id}"
    return {"runs": f"{page}/runs?{runs_view_query()}", "generations (traces)": f"{page}/traces"}


def serve_ui(config: Any, port: int, announce: Callable[[str], Any] = log.info) -> None:
    """Runs the MLflow server in the foreground until Ctrl-C; `announce` receives the runs table's URL."""
    command = ui_command(config, port)
    check_port_free(port)
    announce(f"MLflow UI (store {masked_uri(command[5])}; Ctrl-C stops it)")
    for page, url in ui_urls(config, port).items():
        announce(f"  {page}: {url}")
    try:
        subprocess.run(command, check=False, env={**os.environ})
    except KeyboardInterrupt:
        log.info("stopped")
