"""The `server` fixture of the slow tests that need a real tracking server: scripts/mlflow-server.sh
(MLflow on PostgreSQL, docs/scale-out.md) started in a fresh state folder, on a free port of
127.0.0.1, and stopped afterwards. It skips where PostgreSQL cannot be installed or started.

A test module uses it by importing it (`from mlflow_server_fixture import server_fixture`): pytest
finds it under its fixture name, `server`, which then names no import for the tests' parameters to shadow.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "mlflow-server.sh"
POSTGRES_UNAVAILABLE = 69  # the script's exit code when PostgreSQL cannot be installed or started

log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    """The server of one test: its state folder and port, started and stopped through the script."""

    state: Path
    port: int

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _script(self, command: str, *options: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "HACKABLE_RL_PYTHON": sys.executable}  # the server runs the tests' MLflow
        return subprocess.run(
            ["bash", str(SCRIPT), command, "--state", str(self.state), *options],
            capture_output=True, text=True, timeout=600, env=env,
        )

    def start(self) -> float:
        """Starts PostgreSQL and MLflow; returns the seconds it took. Skips without PostgreSQL."""
        started = time.monotonic()
        result = self._script("start", "--port", str(self.port))
        if result.returncode == POSTGRES_UNAVAILABLE:
            pytest.skip(f"PostgreSQL not available: {result.stderr.strip().splitlines()[-1]}")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"export MLFLOW_TRACKING_URI={self.uri}"
        return time.monotonic() - started

    def stop(self) -> None:
        result = self._script("stop")
        assert result.returncode == 0, result.stderr

    def status(self) -> int:
        return self._script("status").returncode


@pytest.fixture(name="server")
def server_fixture(monkeypatch) -> Iterator[Server]:
    """A started server in a fresh state folder, as this process's MLFLOW_TRACKING_URI (so nothing
    of MLflow's falls back to ./mlflow.db); stopped and removed afterwards, even on failure.

    The state folder is made under the system temp folder, not pytest's tmp_path: PostgreSQL runs
    as user postgres, who cannot enter pytest's folders (mode 700)."""
    state = Path(tempfile.mkdtemp(prefix="mlflow-server-"))
    state.chmod(0o711)  # postgres may pass through to its own data folder, not list the rest
    running = Server(state, _free_port())
    try:
        seconds = running.start()
        log.info("server start (fresh cluster): %.1f s", seconds)
        print(f"\ntiming: server start (fresh cluster): {seconds:.1f} s")
        assert running.status() == 0
        monkeypatch.setenv("MLFLOW_TRACKING_URI", running.uri)
        yield running
    finally:
        running.stop()
        shutil.rmtree(state, ignore_errors=True)
