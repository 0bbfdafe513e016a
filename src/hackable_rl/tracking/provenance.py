"""What a run records about where it came from: code version, DVC experiment, packages, hardware."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

_PACKAGES = (
    "hackable-rl", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
    "mlflow", "dvc", "numpy", "math-verify", "pydantic",
)


def _git(*args: str) -> str | None:
    try:
        result = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """Commit SHA and whether the working tree differs from it (null outside a Git checkout)."""
    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha, "git_dirty": None if status is None else bool(status)}


def dvc_experiment() -> str | None:
    """DVC sets DVC_EXP_NAME inside `dvc exp run`; a plain `dvc repro` or a shell run has none."""
    return os.environ.get("DVC_EXP_NAME")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    torch = sys.modules.get("torch")  # only describe the accelerator when torch is already in use
    if torch is not None:
        info["cuda_available"] = bool(torch.cuda.is_available())
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def config_hash(config_dump: dict[str, Any]) -> str:
    """sha256 of the resolved config (canonical JSON), the identity of a configuration."""
    canonical = json.dumps(config_dump, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
