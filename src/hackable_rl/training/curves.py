"""The training curve: each step's metrics from its generation records (`step_metrics`), and,
declared once, which of them go into `train_curve.csv` and which `train.json` summarises over the
first and last tenth of the steps. The run writes both files from this declaration and the report
reads them by it.

Plain Python (no torch): the report imports it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.stats import hacking_gap, mean
from hackable_rl.reward.records import GenerationRecord


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def step_metrics(records: list[GenerationRecord]) -> dict[str, float | None]:
    """Observed and shaped reward, independent correctness, the online hacking gap, FP/FN rates,
    disagreement, missing/suppressed/down-weighted counts and lengths for one step."""
    verifiers = [r.verifier for r in records]
    observed = [v.reward for v in verifiers]
    correct = [None if r.judgment.correct is None else float(r.judgment.correct) for r in records]
    scored = [(o, c) for o, c in zip(observed, correct, strict=True) if o is not None and c is not None]
    wrong = [o for o, c in scored if c == 0.0]
    right = [o for o, c in scored if c == 1.0]
    return {
        "reward/observed": mean(observed),
        "reward/optimised": mean(v.optimised_reward for v in verifiers),
        "reward/objective": mean(v.final_reward for v in verifiers),
        "judge/correctness": mean(correct),
        "hacking_gap": hacking_gap(observed, correct),
        "verifier/false_positive_rate": _rate(sum(o >= 0.5 for o in wrong), len(wrong)),
        "verifier/false_negative_rate": _rate(sum(o < 0.5 for o in right), len(right)),
        "verifier/disagreement": mean(v.disagreement["U"] for v in verifiers),
        "verifier/missing": float(sum(v.missing for v in verifiers)),
        "verifier/suppressed": float(sum(v.suppressed for v in verifiers)),
        "verifier/down_weighted": float(sum(v.down_weighted for v in verifiers)),
        "format/strict_share": mean(float(v.strict) for v in verifiers),
        "length/completion_tokens": mean(r.completion_tokens for r in records),
    }


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
