"""JSON Lines reading and writing with errors that name the file and line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hackable_rl.errors import UserError

log = logging.getLogger(__name__)


def iter_jsonl(path: str | Path, torn_tail_ok: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, row) for each non-blank line; a malformed line is a UserError.

    `torn_tail_ok` is for append-only logs that a `kill -9` may have cut mid-line: a malformed *last*
    line without its newline is skipped with a warning instead (it was never completely written).
    """
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
                if torn_tail_ok and not line.endswith("\n"):
                    log.warning("%s:%d: dropped a line cut short by an interrupted write", path, number)
                    return
                raise UserError(f"{path}:{number}: not valid JSON ({error.msg} at column {error.colno})") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            yield number, row


def read_jsonl(path: str | Path, torn_tail_ok: bool = False) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path, torn_tail_ok)]


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
    _drop_torn_tail(path)
    count = 0
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps_row(row) + "\n")
            count += 1
        handle.flush()
    return count


def _drop_torn_tail(path: Path) -> None:
    """Cuts a last line left without its newline by a killed writer, so that the next append does not
    glue a new row onto half an old one."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        content = handle.read()
        keep = content.rfind(b"\n") + 1
        handle.truncate(keep)
    log.warning("%s: dropped %d bytes of a line cut short by an interrupted write", path, len(content) - keep)


def write_json(path: str | Path, payload: Any) -> Path:
    """Writes one JSON document atomically (temp file then rename). NaN is refused: undefined
    values must be null, and a NaN here is a bug upstream."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    temp.replace(path)
    return path
