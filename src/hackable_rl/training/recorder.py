"""Generation records: one JSON line per completion, one file per optimiser step.

`runs/<run>/generations/step-XXXXX.jsonl` is written when a step ends and flushed at once, so a
`kill -9` loses at most the step in flight. `metrics.jsonl` beside it holds one line of per-step
metrics. On resume from checkpoint step K, records and metrics of steps after K belong to the
abandoned trajectory: they are moved to `abandoned/` (kept, never mixed into the run).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hackable_rl.core.jsonl import append_jsonl, read_jsonl, write_jsonl
from hackable_rl.reward.records import GenerationRecord

log = logging.getLogger(__name__)


def step_file(generations_dir: Path, step: int) -> Path:
    return generations_dir / f"step-{step:05d}.jsonl"


class GenerationRecorder:
    """Buffers the records of the step in flight; `flush(step)` writes them (JSON, one line each) and
    returns them, stamped with their step."""

    def __init__(self, run_dir: Path, gather: Callable[[list[GenerationRecord]], list[GenerationRecord]] | None = None):
        self.run_dir = run_dir
        self.generations_dir = run_dir / "generations"
        self.metrics_path = run_dir / "metrics.jsonl"
        self._pending: list[GenerationRecord] = []
        self._gather = gather
        """With several training processes: every process's records, on the main one (`Ranks.gather`)."""

    def add(self, records: list[GenerationRecord]) -> None:
        self._pending.extend(self._gather(records) if self._gather else records)

    def flush(self, step: int) -> list[GenerationRecord]:
        records = [record.at_step(step) for record in self._pending]
        self._pending = []
        if records:
            append_jsonl(step_file(self.generations_dir, step), [record.to_json() for record in records])
        return records

    def append_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        append_jsonl(self.metrics_path, [{"step": step, **metrics}])

    def metrics_rows(self) -> list[dict[str, Any]]:
        return read_jsonl(self.metrics_path, torn_tail_ok=True) if self.metrics_path.exists() else []

    def rewind_to(self, step: int) -> int:
        """Moves records and metrics of steps after `step` to `abandoned/<time>/`; returns how many steps moved."""
        later = sorted(p for p in self.generations_dir.glob("step-*.jsonl") if int(p.stem.split("-")[1]) > step)
        rows = self.metrics_rows()
        kept = [row for row in rows if row["step"] <= step]
        if not later and len(kept) == len(rows):
            return 0
        abandoned = self.run_dir / "abandoned" / time.strftime("%Y%m%d-%H%M%S")
        abandoned.mkdir(parents=True, exist_ok=True)
        for path in later:
            shutil.move(str(path), abandoned / path.name)
        if len(kept) != len(rows):
            write_jsonl(abandoned / "metrics.jsonl", [row for row in rows if row["step"] > step])
            write_jsonl(self.metrics_path, kept)
        log.info("resume: moved records of %d steps after step %d to %s", len(later), step, abandoned)
        return len(later)
