"""What training did to each trained arm over its own steps, from the records every condition keeps.

Descriptive, not an outcome. For each arm, the mean over its replicates of two quantities measured on
the training samples, over the first tenth of the steps and over the last tenth (the `train` record of
condition.json, which summary.csv carries per condition):

    judge correctness    the independent judge's verdict on the samples the policy trained on
    training reward      what the training verifier paid them (observed; a noisy member pays wrong
                         answers at its flip rate, so this is not correctness)

with the count of replicates whose judge correctness rose. Every trained arm has both, including the
noise cells, which keep no per-step curve (curve.csv is written only under a flaw): this is where a
reader sees whether a flipped or ensemble arm learnt on its own prompts. The test outcomes, not this,
judge what it learnt.
"""

from __future__ import annotations

import pandas as pd

from hackable_rl.report.conditions import column_mean
from hackable_rl.study.records import BASE

__all__ = ["tenths_lines"]

JUDGE = "train/judge/correctness"
REWARD = "train/reward/observed"


def _first_to_last(group: pd.DataFrame, key: str) -> str:
    first, last = column_mean(group, f"{key}/first"), column_mean(group, f"{key}/last")
    return "-" if first is None or last is None else f"{first:.3f} → {last:.3f}"


def _rose(group: pd.DataFrame) -> str:
    """How many replicates' judge correctness was higher over the last tenth than over the first."""
    pairs = group[[f"{JUDGE}/first", f"{JUDGE}/last"]].dropna()
    return f"{int((pairs[f'{JUDGE}/last'] > pairs[f'{JUDGE}/first']).sum())} of {len(pairs)}" if len(pairs) else "-"


def tenths_lines(table: pd.DataFrame) -> list[str]:
    """The section of report.md: per trained arm, first tenth -> last tenth of its training steps
    (`table` is the study's summary table, one row per condition)."""
    trained = table[(table["method"] != BASE) & (table["status"] == "ok")]
    if trained.empty or f"{JUDGE}/first" not in trained:
        return []
    lines = ["## What training did on its own samples (descriptive)", "",
             "Mean over replicates, first tenth of the steps → last tenth, of the training samples' judge "
             "correctness (the independent judge) and of the reward the training verifier paid them (a flipped "
             "member pays wrong answers at its rate, so reward is not correctness); then how many replicates' "
             "judge correctness rose. The test outcomes above judge what was learnt; this shows where it moved "
             "on the prompts it trained on (summary.csv has each condition's).", "",
             "| cell | method | replicates | judge correctness | training reward | replicates whose judge correctness rose |",
             "| --- | --- | --- | --- | --- | --- |"]
    for (cell, method), group in trained.groupby(["cell", "method"], sort=True):
        lines.append(f"| {cell} | {method} | {len(group)} | {_first_to_last(group, JUDGE)} | "
                     f"{_first_to_last(group, REWARD)} | {_rose(group)} |")
    return [*lines, ""]
