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

    def dataset_dir(self, name: str) -> Path:
        return self.datasets / name

    def model_dir(self, name: str) -> Path:
        return self.models / name

    def run_dir(self, run_name: str) -> Path:
        return self.runs / run_name

    def permanent_checkpoint(self, run_name: str, step: int) -> Path:
        return self.run_dir(run_name) / "checkpoints" / "permanent" / f"step-{step}"

    def eval_dir(self, run_name: str) -> Path:
        return self.eval / run_name


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
