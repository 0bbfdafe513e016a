"""Is a resumable checkpoint intact? Checked from the files alone, before TRL loads anything.

A checkpoint the Trainer finished writing can still be damaged afterwards (a full disk, a copy cut
short, a hand edit). Loading it fails deep inside safetensors or torch with a traceback, although
the previous checkpoint is intact. So `training.checkpoints.last_resumable` asks
`checkpoint_problem` about the newest one and, when it answers, falls back to the one before.

What is checked, per file (each check reads headers, never the tensors):
- `trainer_state.json` and every other `*.json`: valid JSON; the state's `global_step` is the
  folder's step;
- `*.safetensors`: the 8-byte header length, the JSON header, and a file size that is exactly the
  header plus the end of the last tensor's data;
- `*.pt`, `*.pth`, `*.bin` (torch.save's zip format): a readable zip directory whose entries all lie
  inside the file;
- no file is empty.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME

_MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # safetensors' own limit


def checkpoint_problem(folder: Path, step: int) -> str | None:
    """Why the resumable checkpoint `folder` of `step` cannot be resumed from, or None when it can."""
    problem = _state_problem(folder / TRAINER_STATE_NAME, step)
    if problem:
        return problem
    for path in sorted(folder.iterdir()):
        if path.is_file():
            problem = _file_problem(path)
            if problem:
                return f"{path.name}: {problem}"
    return None


def _state_problem(path: Path, step: int) -> str | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return f"{path.name}: not readable JSON ({type(error).__name__})"
    if not isinstance(state, dict) or state.get("global_step") != step:
        found = state.get("global_step") if isinstance(state, dict) else type(state).__name__
        return f"{path.name}: global_step {found!r}, expected {step}"
    return None


def _file_problem(path: Path) -> str | None:
    if path.stat().st_size == 0:
        return "is empty"
    suffix = path.suffix
    if suffix == ".json":
        return _json_problem(path)
    if suffix == ".safetensors":
        return safetensors_problem(path)
    if suffix in {".pt", ".pth", ".bin"}:
        return _torch_zip_problem(path)
    return None


def _json_problem(path: Path) -> str | None:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        return f"not valid JSON ({type(error).__name__})"
    return None


def safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a whole safetensors file (header and size), or None."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            return f"truncated ({size} bytes, no header)"
        (header_length,) = struct.unpack("<Q", prefix)
        if header_length > min(size - 8, _MAX_SAFETENSORS_HEADER):
            return f"truncated or not safetensors (header of {header_length} bytes in a file of {size})"
        try:
            header = json.loads(handle.read(header_length))
        except (UnicodeDecodeError, ValueError):
            return "the safetensors header is not valid JSON"
    if not isinstance(header, dict):
        return "the safetensors header is not a JSON object"
    ends = [entry["data_offsets"][1] for name, entry in header.items()
            if name != "__metadata__" and isinstance(entry, dict) and len(entry.get("data_offsets") or []) == 2]
    expected = 8 + header_length + max(ends, default=0)
    if size != expected:
        return f"truncated ({size} bytes; its header describes {expected})"
    return None


def _torch_zip_problem(path: Path) -> str | None:
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            for entry in archive.infolist():
                if entry.header_offset + entry.compress_size > size:
                    return f"truncated (entry {entry.filename} runs past the end)"
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        return f"not a whole torch.save file ({error})"
    return None
