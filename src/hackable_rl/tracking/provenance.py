"""What a run records about where it came from: code version, DVC experiment, packages, hardware."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from hackable_rl.core.numerics import dispatch_record

_PACKAGES = (
    "hackable-rl", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
    "mlflow", "dvc", "numpy", "math-verify", "pydantic",
)


def _git(*args: str, strip: bool = True) -> str | None:
    try:
        result = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() if strip else result.stdout


def git_state() -> dict[str, Any]:
    """Commit SHA and whether the working tree differs from it (null outside a Git checkout).

    Files DVC writes (each dvc.yaml's outs, metrics and plots, and its dvc.lock) do not count: every
    `dvc repro` rewrites them, so counting them would mark every run of the pipeline dirty. Changed
    code and params do count."""
    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain=v1", "-z", "--untracked-files=no", strip=False)
    root = _git("rev-parse", "--show-toplevel")
    if status is None or root is None:
        return {"git_sha": sha, "git_dirty": None}
    managed = dvc_managed_paths(Path(root))
    changed = [path for path in _porcelain_paths(status) if not _is_under(path, managed)]
    return {"git_sha": sha, "git_dirty": bool(changed)}


def _porcelain_paths(status: str) -> list[str]:
    """Paths of `git status --porcelain=v1 -z` (relative to the repository root); a rename's entry
    is followed by its old path, which is skipped."""
    paths, entries = [], iter(status.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            next(entries, None)
    return paths


def dvc_managed_paths(root: Path) -> set[str]:
    """Repository-relative paths DVC writes: every stage's outs, metrics and plots in each dvc.yaml
    Git tracks under `root`, and each dvc.yaml's dvc.lock."""
    listed = _git("-C", str(root), "ls-files", "-z", "--", "dvc.yaml", "*/dvc.yaml", strip=False) or ""
    managed: set[str] = set()
    for relative in filter(None, listed.split("\0")):
        dvc_yaml = root / relative
        folder = Path(relative).parent
        managed.add((folder / "dvc.lock").as_posix())
        stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages") or {}
        for stage in stages.values():
            body = stage.get("do", stage)  # a `foreach` stage declares its outs under `do`
            for section in ("outs", "metrics", "plots"):
                for entry in body.get(section) or []:
                    out = next(iter(entry)) if isinstance(entry, dict) else entry
                    managed.add(os.path.normpath(folder / out).replace(os.sep, "/"))
    return managed


def _is_under(path: str, managed: set[str]) -> bool:
    """Whether `path` is a managed path or inside one; `${item.x}` in a matrix stage's outs matches
    any text."""
    patterns = [re.sub(r"\$\{[^}]*\}", "*", out) if "${" in out else out for out in managed]
    parts = path.rstrip("/").split("/")
    prefixes = ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes for pattern in patterns)


def dvc_lock_hash(folder: Path = Path(".")) -> str | None:
    """sha256 of the dvc.lock of the pipeline being run (the current folder; DVC runs a stage in its
    dvc.yaml's folder), as it stood when the run started; None without one."""
    lock = folder / "dvc.lock"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else None


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
        "cpu_dispatch": dispatch_record(),
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


def dataset_input(dataset_dir: Path, split: str) -> dict[str, Any] | None:
    """What `Tracker.log_dataset` records for one prepared split: name `<dataset>/<split>`, digest
    the manifest's sha256 (its first 32 hex digits: MLflow keeps 36 characters), the split file as
    source, and its rows and own sha256 as profile. None before `hackable-rl prepare` wrote a manifest."""
    manifest_path = dataset_dir / "manifest.json"
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text())
    output = manifest.get("outputs", {}).get(split, {})
    manifest_sha256 = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    return {
        "name": f"{manifest.get('name', dataset_dir.name)}/{split}",
        "digest": manifest_sha256[:32],
        "source": (dataset_dir / output.get("file", f"{split}.jsonl")).resolve().as_uri(),
        "profile": {"rows": output.get("rows"), "sha256": output.get("sha256"), "manifest_sha256": manifest_sha256},
    }
