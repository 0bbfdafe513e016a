"""report.training_tenths: each trained arm's first tenth of steps against its last, on its own samples."""

from __future__ import annotations

import math

import pandas as pd

from hackable_rl.report.training_tenths import tenths_lines


def _row(cell: str, method: str, seed: int, judge: tuple[float, float] | None, reward: tuple[float, float] | None,
         status: str = "ok") -> dict:
    first_last = {}
    for key, pair in (("train/judge/correctness", judge), ("train/reward/observed", reward)):
        first_last |= {f"{key}/first": pair[0] if pair else math.nan, f"{key}/last": pair[1] if pair else math.nan}
    return {"cell": cell, "method": method, "seed": seed, "status": status} | first_last


def test_every_trained_arm_gets_its_mean_first_and_last_tenth_and_the_replicates_that_rose() -> None:
    table = pd.DataFrame([
        _row("blind", "base", 0, None, None),  # base trains nothing: no row
        _row("flip0.4", "baseline", 0, (0.30, 0.40), (0.50, 0.40)),
        _row("flip0.4", "baseline", 1, (0.30, 0.20), (0.50, 0.60)),
        _row("noisy3", "robust", 0, (0.20, 0.30), (0.50, 0.45)),
        _row("noisy3", "robust", 1, None, None, status="failed"),  # a failed condition is left out
    ])

    lines = "\n".join(tenths_lines(table))

    assert "| flip0.4 | baseline | 2 | 0.300 → 0.300 | 0.500 → 0.500 | 1 of 2 |" in lines
    assert "| noisy3 | robust | 1 | 0.200 → 0.300 | 0.500 → 0.450 | 1 of 1 |" in lines
    assert "| blind | base" not in lines


def test_a_table_without_training_records_has_no_section() -> None:
    assert tenths_lines(pd.DataFrame([{"cell": "blind", "method": "base", "seed": 0, "status": "ok"}])) == []
