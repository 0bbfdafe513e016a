"""What a pretrained policy is: its source, kind, pins and the sha256 of every weight file.

The warm-start stage writes this as `<policy_dir>/reference.json`, so a run can show which weights
it started from (and a changed upstream file shows as a changed hash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_json
from hackable_rl.core.storage import file_sha256
from hackable_rl.models.loading import PolicySource, download_hub_snapshot

__all__ = ["REFERENCE_FILE", "pretrained_reference", "save_reference"]

REFERENCE_FILE = "reference.json"


def _weight_files(source: PolicySource) -> tuple[Path, list[Path], str | None]:
    """(folder, weight files, resolved hub commit) of a pretrained source."""
    if source.kind == "gguf":
        folder = Path(source.location)
        return folder, [folder / source.gguf_file], None
    folder = download_hub_snapshot(source) if source.kind == "hub" else Path(source.location)
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise UserError(f"{folder}: no .safetensors weights (pickle checkpoints are refused)")
    return folder, weights, folder.name if source.kind == "hub" else None


def pretrained_reference(config: ExperimentConfig, source: PolicySource) -> dict[str, Any]:
    """Source, kind, location, pins and the sha256 of every weight file of a pretrained source."""
    folder, weights, commit = _weight_files(source)
    return {
        "source": config.model.source,
        "kind": source.kind,
        "location": str(folder),
        "revision": source.revision,
        "resolved_commit": commit,
        "gguf_file": source.gguf_file,
        "sha256": {path.name: file_sha256(path) for path in weights},
    }


def save_reference(reference: dict[str, Any], folder: Path) -> Path:
    """Writes `reference` as `folder/reference.json`; returns that path."""
    return write_json(folder / REFERENCE_FILE, reference)
