"""Reading source rows (a local JSONL file or a Hugging Face dataset) and routing bad rows.

Every provider turns raw rows into `TrainingSample`s through `convert_rows`: a row that cannot be
converted raises `RowError`, and `BadRows` either stops with the row's location (`file:line`) or,
with `data.on_bad_row: skip`, counts it so the manifest reports it. Nothing is dropped silently.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hackable_rl.answers.parsing import parse_reference
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_text_lines, parse_json_line
from hackable_rl.core.safe_write import not_a_readable_file_problem
from hackable_rl.core.storage import file_sha256
from hackable_rl.data.schema import TrainingSample

log = logging.getLogger(__name__)
T = TypeVar("T")

# The manifest lists at most this many skipped-row messages (the count is always exact).
_MAX_LISTED_SKIPS = 20


class RowError(ValueError):
    """One row that cannot become a sample: names the field and what was expected."""


@dataclass(frozen=True)
class SourceRows:
    """Raw rows of one source with their locations (`path:line` or `hf:<id>[split]#row`)."""

    manifest: dict[str, Any]
    """What the manifest records about this source (kind, path and sha256, or hf id and revision)."""
    rows: list[tuple[str, dict[str, Any]]]


@dataclass
class BadRows:
    """Collects rows that could not be used: raises on the first (`error`) or counts them (`skip`)."""

    policy: str
    messages: list[str] = field(default_factory=list)

    def report(self, where: str, problem: str) -> None:
        message = f"{where}: {problem}"
        if self.policy == "error":
            raise UserError(f"{message} (set data.on_bad_row: skip to skip and count such rows)")
        log.warning("skipping bad row %s", message)
        self.messages.append(message)

    def summary(self) -> dict[str, Any]:
        return {"skipped_rows": len(self.messages), "skipped_examples": self.messages[:_MAX_LISTED_SKIPS]}


def read_local(path: str | Path, bad_rows: BadRows, hint: str, field_name: str = "data.path") -> SourceRows:
    """Rows of a local JSONL file; a missing file says how to obtain it, a malformed line goes to `bad_rows`."""
    path = Path(path).expanduser()
    problem = not_a_readable_file_problem(path)
    if problem is not None:
        raise UserError(f"{field_name}: {path} {problem}; {hint}")
    rows = []
    for number, line in iter_text_lines(path):  # bytes that are not UTF-8: a UserError naming the line
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = parse_json_line(line)  # NaN, Infinity and runaway nesting count as malformed
        except json.JSONDecodeError as error:
            bad_rows.report(where, f"not valid JSON ({error.msg} at column {error.colno})")
            continue
        if not isinstance(row, dict):
            bad_rows.report(where, f"expected a JSON object, got {type(row).__name__}")
            continue
        rows.append((where, row))
    manifest = {"kind": "file", "path": str(path), "sha256": file_sha256(path), "rows": len(rows)}
    return SourceRows(manifest, rows)


def read_hub(dataset: str, config: str | None, revision: str | None, split: str, hint: str) -> SourceRows:
    """Rows of a Hugging Face dataset split (works offline only when it is already cached)."""
    import datasets  # heavy; only needed on this path

    try:
        loaded = datasets.load_dataset(dataset, config, revision=revision, split=split)
    except (OSError, ValueError) as error:
        raise UserError(
            f"data.hf_dataset: cannot load {dataset!r} split {split!r} ({type(error).__name__}: {error}); "
            f"without network access use a local file instead: {hint}"
        ) from None
    if revision is None:
        log.warning(
            "data.hf_revision is null: %s is not pinned; record a commit for reproducible data", dataset
        )
    rows = [(f"hf:{dataset}[{split}]#{index + 1}", dict(row)) for index, row in enumerate(loaded)]
    manifest = {
        "kind": "huggingface",
        "dataset": dataset,
        "config": config,
        "split": split,
        "revision": revision,
        "fingerprint": getattr(loaded, "_fingerprint", None),
        "rows": len(rows),
    }
    return SourceRows(manifest, rows)


def convert_rows(
    source: SourceRows, convert: Callable[[str, dict[str, Any]], TrainingSample | None], bad_rows: BadRows
) -> list[TrainingSample]:
    """Applies `convert(where, row)` to each row; a RowError goes to `bad_rows`; None means filtered out."""
    samples = []
    for where, row in source.rows:
        try:
            sample = convert(where, row)
        except RowError as error:
            bad_rows.report(where, str(error))
            continue
        if sample is not None:
            samples.append(sample)
    return samples


def required_text(row: dict[str, Any], key: str) -> str:
    """The non-empty string `row[key]`, or a RowError naming the field."""
    if key not in row:
        raise RowError(f"field {key!r} is missing (fields present: {', '.join(sorted(row)) or 'none'})")
    value = row[key]
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"field {key!r}: expected a non-empty string, got {value!r:.60}")
    return value


def parsed_reference(text: str, key: str) -> str:
    """The canonical reference parsed by the project's parser; an unparseable one is a RowError."""
    try:
        return parse_reference(text)
    except ValueError as error:
        raise RowError(f"field {key!r}: unparseable reference ({error})") from None


def shuffled(items: Sequence[T], seed: int, salt: str) -> list[T]:
    """A copy of `items` in an order fixed by (seed, salt); salts keep splits independent."""
    order = list(items)
    random.Random(f"{seed}:{salt}").shuffle(order)
    return order


def take(items: Sequence[T], size: int | None) -> list[T]:
    return list(items) if size is None else list(items[:size])
