"""JSON Lines reading and writing with errors that name the file and line."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.safe_write import not_a_file_problem, replace_file

log = logging.getLogger(__name__)


def input_file(path: str | Path) -> Path:
    """`path` as a file to read: a missing path or a folder is a UserError that names it."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder; expected a file")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    return path


def iter_text_lines(path: str | Path, torn_tail_ok: bool = False) -> Iterator[tuple[int, str]]:
    """Yields (line number, text) of a UTF-8 file; bytes that are not UTF-8 are a UserError with
    their line and column (decoding line by line is what lets the error name the line).
    `torn_tail_ok`: a last line cut inside a character by a killed writer ends the file instead."""
    path = input_file(path)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                if torn_tail_ok and not raw.endswith(b"\n"):
                    log.warning("%s:%d: dropped a line cut short by an interrupted write", path, number)
                    return
                raise UserError(
                    f"{path}:{number}: not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1}); "
                    "save the file as UTF-8"
                ) from None
            yield number, text


class _NonFiniteNumber(ValueError):
    """Python's json reads NaN and Infinity, which JSON does not have; rows must say null instead."""


class _RefusedRow(ValueError):
    """Valid JSON that a row must not be: a key given twice, a number no float can hold."""


def _refuse_constant(name: str) -> Any:
    raise _NonFiniteNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: valid JSON, but it reads as inf
        raise _RefusedRow(f"the number {text[:20]} is out of range (it reads as {value})")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    row = dict(pairs)
    if len(row) != len(pairs):  # JSON keeps the last value of a repeated key, silently
        keys = [key for key, _ in pairs]
        repeated = next(key for key in keys if keys.count(key) > 1)
        raise _RefusedRow(f"duplicate key {repeated!r}; JSON would keep only its last value")
    return row


def parse_json_line(line: str) -> Any:
    """`json.loads` for one line of JSONL, stricter than Python's: NaN/Infinity, numbers out of float
    range (1e400) or past Python's digit limit, a key given twice in one object, and nesting deeper
    than the interpreter can follow raise `json.JSONDecodeError` like any other malformed line."""
    try:
        return json.loads(
            line, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except _NonFiniteNumber as error:
        constant = str(error)
        raise json.JSONDecodeError(
            f"{constant} is not a JSON number; write null for a missing value", line, max(line.find(constant), 0)
        ) from None
    except _RefusedRow as error:
        raise json.JSONDecodeError(str(error), line, 0) from None
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", line, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:  # an integer past sys.get_int_max_str_digits (4,300 digits)
        raise json.JSONDecodeError(f"a number too long to read ({str(error).split(';')[0]})", line, 0) from None


def iter_jsonl(path: str | Path, torn_tail_ok: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, row) for each non-blank line; a malformed line is a UserError.

    `torn_tail_ok` is for append-only logs that a `kill -9` may have cut mid-line: a malformed *last*
    line without its newline is skipped with a warning instead (it was never completely written).
    """
    path = input_file(path)
    for number, line in iter_text_lines(path, torn_tail_ok):
        if not line.strip():
            continue
        try:
            row = parse_json_line(line)
        except json.JSONDecodeError as error:
            if torn_tail_ok and not line.endswith("\n"):
                log.warning("%s:%d: dropped a line cut short by an interrupted write", path, number)
                return
            raise UserError(f"{path}:{number}: not valid JSON ({error.msg} at column {error.colno})") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        yield number, row


def read_json(path: str | Path) -> Any:
    """One JSON document (a metrics or run file), as strict as `parse_json_line`; errors name the file."""
    path = input_file(path)
    text = "".join(line for _, line in iter_text_lines(path))
    try:
        return parse_json_line(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}: not valid JSON ({error.msg} at column {error.colno})") from None


def read_jsonl(path: str | Path, torn_tail_ok: bool = False) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path, torn_tail_ok)]


def dumps_row(row: dict[str, Any]) -> str:
    """One canonical JSONL line (sorted keys would reorder fields users read; keep insertion order)."""
    return json.dumps(row, ensure_ascii=False, allow_nan=False)


def output_file(path: str | Path) -> Path:
    """`path` as a file to write, its folder created: a folder, device, FIFO or socket at `path`, or
    a file where a parent folder should be, is a UserError that names it (`safe_write`)."""
    path = Path(path)
    problem = not_a_file_problem(path)
    if problem is not None:
        raise UserError(f"{path}: {problem}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"{path}: cannot create its folder {path.parent}: a file is in the way") from None
    return path


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Writes rows atomically (temp file then rename, `safe_write.replace_file`); returns the count."""
    path = output_file(path)
    count = 0
    with replace_file(path) as handle:
        for row in rows:
            handle.write(dumps_row(row) + "\n")
            count += 1
    return count


def append_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Appends rows and flushes to disk (generation records survive a kill -9)."""
    path = output_file(path)
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
    path = output_file(path)
    text = json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    with replace_file(path) as handle:
        handle.write(text)
    return path
