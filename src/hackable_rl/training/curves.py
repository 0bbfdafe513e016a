"""The training curve, declared once: which per-step metrics (from `step_metrics`) go into
`train_curve.csv`, and which of them `train.json` summarises over the first and last tenth of the
steps. The run writes both files from this declaration and the report reads them by it.

Plain Python (no torch): the report imports it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.stats import mean


@dataclass(frozen=True)
class CurveMetric:
    """One per-step metric of the training curve."""

    key: str  # as in `step_metrics` and metrics.jsonl, e.g. "judge/correctness"
    summarised: bool  # train.json holds `<key>/first` and `<key>/last` (means over a tenth of the steps)

    @property
    def csv_column(self) -> str:
        """The column in train_curve.csv: `dvc plots` and pandas read `/` awkwardly."""
        return self.key.replace("/", "_")


CURVE_METRICS = (
    CurveMetric("judge/correctness", summarised=True),
    CurveMetric("reward/observed", summarised=True),
    CurveMetric("reward/optimised", summarised=True),
    CurveMetric("hacking_gap", summarised=True),
    CurveMetric("verifier/disagreement", summarised=False),
)
SUMMARISED_KEYS = tuple(metric.key for metric in CURVE_METRICS if metric.summarised)


def curve_column(key: str) -> str:
    """The train_curve.csv column of the declared curve metric `key`."""
    for metric in CURVE_METRICS:
        if metric.key == key:
            return metric.csv_column
    raise KeyError(f"{key!r} is not a declared curve metric ({', '.join(m.key for m in CURVE_METRICS)})")


def write_curve(rows: list[dict[str, Any]], path: Path) -> None:
    """Per-step learning curve as CSV for `dvc plots` (undefined cells blank)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", *(metric.csv_column for metric in CURVE_METRICS)])
        for row in rows:
            writer.writerow([row["step"], *("" if row.get(m.key) is None else row[m.key] for m in CURVE_METRICS)])


def first_tenth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return rows[: _tenth(rows)]


def last_tenth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return rows[-_tenth(rows):]


def _tenth(rows: list[dict[str, Any]]) -> int:
    """A tenth of the steps, at least one, so that a short run is still summarised."""
    return max(1, len(rows) // 10)


def mean_of(key: str, rows: list[dict[str, Any]]) -> float | None:
    """Mean of `key` over the rows where it is defined; None (not 0) when it never is."""
    return mean(row.get(key) for row in rows)


def summarise_curve(rows: list[dict[str, Any]], final_step: int, seconds: float) -> dict[str, Any]:
    """train.json: the step count, the wall time, and each summarised metric over the first and last
    tenth of the steps (sampled on training prompts)."""
    first, last = first_tenth(rows), last_tenth(rows)
    summary: dict[str, Any] = {"step": final_step, "seconds": seconds}
    for key in SUMMARISED_KEYS:
        summary[f"{key}/first"] = mean_of(key, first)
        summary[f"{key}/last"] = mean_of(key, last)
    return summary
