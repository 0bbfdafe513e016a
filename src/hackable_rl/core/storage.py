"""The runtime layout under `storage.cache_dir`.

```
<cache>/datasets/<name>/{train,eval,sft}.jsonl, manifest.json
<cache>/models/<policy>/
<cache>/artifacts/runs/<run>/{run.json, generations/, checkpoints/, checkpoints/permanent/step-N/}
<cache>/artifacts/sweeps/<study>/
<cache>/artifacts/eval/<run>/{generations.jsonl, metrics.json}
<cache>/logs/
<cache>/mlflow/{mlflow.db, artifacts/}      # the embedded MLflow store
```
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.safe_write import not_a_file_problem

# DVC runs queued and --temp experiments in a copy of the repository under this folder; the
# embedded MLflow store must stay in the real repository so every experiment lands in one store.
_DVC_TEMP_WORKSPACE = (".dvc", "tmp", "exps")


def project_root(start: Path | None = None) -> Path:
    """The repository this process works for, escaping a DVC temporary experiment workspace."""
    here = (start or Path.cwd()).resolve()
    parts = here.parts
    for index in range(len(parts) - len(_DVC_TEMP_WORKSPACE) + 1):
        if parts[index : index + len(_DVC_TEMP_WORKSPACE)] == _DVC_TEMP_WORKSPACE:
            return Path(*parts[:index])
    return here


@dataclass(frozen=True)
class Storage:
    """Paths of the runtime layout, all absolute."""

    cache_dir: Path
    runs_dir: Path | None = None
    """Where run folders go; None: `<cache>/artifacts/runs`."""

    @classmethod
    def from_config(
        cls, cache_dir: str | Path, cwd: Path | None = None, runs_dir: str | Path | None = None
    ) -> Storage:
        path = Path(cache_dir).expanduser()
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        path = path.resolve()
        return cls(path, None if runs_dir is None else _under(path, runs_dir))

    @classmethod
    def of(cls, storage_config: Any) -> Storage:
        """The layout a config's `storage` section describes."""
        return cls.from_config(storage_config.cache_dir, runs_dir=storage_config.runs_dir)

    def resolve(self, path: str | Path) -> Path:
        """A runtime path: absolute as given, relative ones under the cache root."""
        return _under(self.cache_dir, path)

    @property
    def datasets(self) -> Path:
        return self.cache_dir / "datasets"

    @property
    def models(self) -> Path:
        return self.cache_dir / "models"

    @property
    def runs(self) -> Path:
        return self.runs_dir or self.cache_dir / "artifacts" / "runs"

    @property
    def sweeps(self) -> Path:
        return self.cache_dir / "artifacts" / "sweeps"

    @property
    def eval(self) -> Path:
        return self.cache_dir / "artifacts" / "eval"

    @property
    def logs(self) -> Path:
        return self.cache_dir / "logs"

    # Folders named by the user (run, dataset) go through `child_dir`: they are rewritten and, with
    # `train --overwrite`, deleted, so a name such as `../somewhere` must never reach outside the cache.
    def dataset_dir(self, name: str) -> Path:
        return child_dir(self.datasets, name, "data.name")

    def model_dir(self, name: str) -> Path:
        # Built by models.loading from data.name (checked) or a model source; never deleted.
        return self.models / name

    def run_dir(self, run_name: str) -> Path:
        return child_dir(self.runs, run_name, "run name (tracking.run_name)")

    def permanent_checkpoint(self, run_name: str, step: int) -> Path:
        return self.run_dir(run_name) / "checkpoints" / "permanent" / f"step-{step}"

    def eval_dir(self, run_name: str) -> Path:
        # Not `child_dir`: the name of a policy without a run is built from model.source (a hub id
        # holds a `/`); it may nest, never leave the eval root.
        return inside(self.eval, self.eval / run_name, "evaluation folder name")


def folder_name_problem(name: object) -> str | None:
    """Why `name` cannot be one folder directly under a root, or None when it can.

    A name is one path component: not empty, no `/` or `\\`, no `..` anywhere, not `.`, no NUL.
    """
    if not isinstance(name, str) or not name.strip():
        return "is empty; expected a folder name such as baseline-flip-r0.2-s0"
    if "/" in name or "\\" in name:
        return "contains a path separator; expected one folder name, without / or \\"
    if ".." in name or name == ".":
        return "contains '..' (or is '.'); expected one folder name inside its root"
    if "\0" in name:
        return "contains a NUL character"
    if len(name.encode("utf-8", "surrogateescape")) > FOLDER_NAME_MAX:
        return (f"is {len(name.encode('utf-8', 'surrogateescape'))} bytes long; a folder name (with the suffixes "
                f"the project adds to it) holds at most {FOLDER_NAME_MAX}")
    return None


FOLDER_NAME_MAX = 200
"""Bytes in a run or data set name: file systems allow 255 for one name, and the project adds suffixes
(`-s<seed>`, `-corrupted`, `.lock`) to some."""


def child_dir(root: Path, name: str, field: str) -> Path:
    """`root / name`, after checking that `name` is one folder name and that the folder, symlinks
    resolved, lies strictly inside `root`. The UserError names `field` (what the name came from)."""
    problem = folder_name_problem(name)
    if problem is not None:
        raise UserError(f"{field}: {name!r} {problem}")
    return inside(root, root / name, field)


def inside(root: Path, folder: Path, field: str) -> Path:
    """`folder`, once its resolved path (symlinks followed) is checked to lie strictly inside `root`."""
    resolved, resolved_root = folder.resolve(), root.resolve()
    if resolved == resolved_root or not resolved.is_relative_to(resolved_root):
        raise UserError(f"{field}: {folder} resolves to {resolved}, outside {resolved_root}; not used")
    return folder


def check_output_path(path: Path, option: str, folder: bool = False) -> None:
    """Refuses, before any work, an output path that cannot be written: a folder where a file goes,
    a file where a folder goes, or a file in the way of a parent folder. `option` names where the
    path came from (`--out`, `report.out_dir`)."""
    if folder and path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: is a file; expected a folder")
    if not folder and path.is_dir():
        raise UserError(f"{option} {path}: is a folder; expected a file path")
    problem = None if folder else not_a_file_problem(path)
    if problem is not None:  # a device, FIFO or socket: a write would replace it (`safe_write`)
        raise UserError(f"{option} {path}: {problem}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option} {path}: {parent} is a file, not a folder")
            return


def _under(root: Path, path: str | Path) -> Path:
    path = Path(path).expanduser()
    return path if path.is_absolute() else root / path


def mlflow_store_dir(cache_dir: str | Path) -> Path:
    """The embedded MLflow store: under the cache root of the real repository (not a DVC temp copy)."""
    cache = Path(cache_dir).expanduser()
    if cache.is_absolute():
        return cache / "mlflow"
    return project_root() / cache / "mlflow"


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (manifests, weights, provenance)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
