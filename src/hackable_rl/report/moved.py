"""How far each trained arm of a real-model study moved from its replicate's base policy on the test prompts.

Descriptive, not an outcome. Base and trained evaluations share their sampling seeds (the same prompts,
the same generator seeds), so a policy that training did not move draws the same samples as its base:
its paired difference is near 0 in every replicate and the interval across replicates is narrow for
that reason, not because the model learnt something precisely. Per replicate and arm, against that
replicate's base on the same prompts:

    same_correct    the share of prompts with the same number of correct samples
    same_greedy     the share with the same greedy verdict (prompts judged greedily in both)
    correlation     Pearson's r of the per-prompt correct counts (undefined where either is constant)

`moved.csv` holds the rows; report.md the range over replicates per arm.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, PromptResult, read_prompt_results
from hackable_rl.report.declared import CellKey
from hackable_rl.study.records import BASE

__all__ = ["MOVED_FILE", "Moved", "moved_from_base", "moved_lines", "write_moved"]

MOVED_FILE = "moved.csv"


@dataclass(frozen=True)
class Moved:
    """One trained condition against its replicate's base, on the prompts both evaluated."""

    cell: str
    method: str
    seed: int
    prompts: int
    same_correct: float
    same_greedy: float | None
    correlation: float | None


def _compare(cell: str, method: str, seed: int, trained: list[PromptResult], base: list[PromptResult]) -> Moved | None:
    by_id = {result.prompt_id: result for result in base}
    pairs = [(result, by_id[result.prompt_id]) for result in trained if result.prompt_id in by_id]
    if not pairs:
        return None
    greedy = [(a.greedy_correct, b.greedy_correct) for a, b in pairs
              if a.greedy_correct is not None and b.greedy_correct is not None]
    try:
        correlation = statistics.correlation([a.correct for a, _ in pairs], [b.correct for _, b in pairs])
    except statistics.StatisticsError:  # a constant column: no correlation to speak of
        correlation = None
    return Moved(cell, method, seed, len(pairs), sum(a.correct == b.correct for a, b in pairs) / len(pairs),
                 sum(a == b for a, b in greedy) / len(greedy) if greedy else None, correlation)


def moved_from_base(cells: Mapping[CellKey, dict[int, Path]]) -> list[Moved]:
    """Every trained condition against the base of its seed, in cell, method and seed order."""
    base_folders = next((seeds for (_, method), seeds in cells.items() if method == BASE), {})
    base = {seed: read_prompt_results(folder / PROMPTS_FILE) for seed, folder in base_folders.items()}
    rows = []
    for (cell, method), seeds in sorted(cells.items()):
        if method == BASE:
            continue
        for seed, folder in sorted(seeds.items()):
            if seed in base:
                row = _compare(cell, method, seed, read_prompt_results(folder / PROMPTS_FILE), base[seed])
                rows += [row] if row else []
    return rows


def write_moved(rows: list[Moved], out_dir: Path) -> Path:
    path = out_dir / MOVED_FILE
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Moved.__dataclass_fields__))
        writer.writeheader()
        writer.writerows({key: "" if value is None else value for key, value in asdict(row).items()} for row in rows)
    return path


def _span(values: list[float | None], fmt: str) -> str:
    known = [value for value in values if value is not None]
    if not known:
        return "-"
    return format(known[0], fmt) if len(known) == 1 else f"{format(min(known), fmt)}-{format(max(known), fmt)}"


def moved_lines(rows: list[Moved]) -> list[str]:
    """The section of report.md: each arm's range over its replicates."""
    if not rows:
        return []
    arms: dict[tuple[str, str], list[Moved]] = {}
    for row in rows:
        arms.setdefault((row.cell, row.method), []).append(row)
    lines = ["## How far training moved each arm from its base (descriptive)", "",
             "Per replicate, on the test prompts, against that replicate's base policy: base and trained evaluations "
             "share their sampling seeds, so a policy that did not move draws the same samples, and its paired "
             "difference is near 0 in every replicate whatever the noise (a narrow interval for that reason). "
             f"The range over replicates (`{MOVED_FILE}` per replicate):", "",
             "| cell | method | replicates | same number correct | same greedy verdict | r of correct counts |",
             "| --- | --- | --- | --- | --- | --- |"]
    for (cell, method), group in arms.items():
        lines.append(f"| {cell} | {method} | {len(group)} | {_span([r.same_correct for r in group], '.0%')} | "
                     f"{_span([r.same_greedy for r in group], '.0%')} | {_span([r.correlation for r in group], '.2f')} |")
    return [*lines, ""]
