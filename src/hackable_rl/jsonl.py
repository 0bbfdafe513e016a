"""JSON Lines reading and writing with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hackable_rl.errors import UserError


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, row) for each non-blank line; a malformed line is a UserError."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise UserError(f"{path}:{number}: not valid JSON ({error.msg} at column {error.colno})") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            yield number, row


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path)]


def dumps_row(row: dict[str, Any]) -> str:
    """One canonical JSONL line (sorted keys would reorder fields users read; keep insertion order)."""
    return json.dumps(row, ensure_ascii=False, allow_nan=False)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Writes rows atomically (temp file then rename); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    count = 0
    with temp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps_row(row) + "\n")
            count += 1
    temp.replace(path)
    return count


def append_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Appends rows and flushes to disk (generation records survive a kill -9)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps_row(row) + "\n")
            count += 1
        handle.flush()
    return count


def write_json(path: str | Path, payload: Any) -> Path:
    """Writes one JSON document atomically (temp file then rename). NaN is refused: undefined
    values must be null, and a NaN here is a bug upstream."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    temp.replace(path)
    return path
