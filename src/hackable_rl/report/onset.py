"""After a run: when did the judge see hacking start, and did a judge-free signal warn before it?

`analyse_run_onset(run_dir, config)` reads a run folder's `generations/step-*.jsonl` (the per-sample
rewards and judge verdicts, and the records the alarm signals come from) and `metrics.jsonl` (TRL's
`trl/entropy`), so it works on any run, whether or not its alarm was on. It gives:

- the judge onset (`judge_onset`): the first step the hacking gap has clearly risen above both 0 and
  its own start (docs/metrics.md, "Hacking-onset alarm", states the rule);
- each alarm rule's first crossing (`training.alarm.first_crossings`, the rules the alarm runs live);
- each rule's lead (`lead_lag`): judge onset minus crossing step, positive when it warned first;
- the rule that warned first (`first_warning`).

Undefined is None, never 0: no judge onset, or a rule that never fired, has no lead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config import AlarmConfig
from hackable_rl.jsonl import iter_jsonl, read_jsonl
from hackable_rl.stats import hacking_gap
from hackable_rl.training.alarm import StepSignals, first_crossings, step_signals

__all__ = [
    "Z_95", "RunSteps", "OnsetAnalysis", "read_run_steps", "judge_onset", "lead_lag", "first_warning",
    "analyse_onset", "analyse_run_onset",
]

Z_95 = 1.959963984540054
"""The standard normal's 97.5th percentile: the half-width of a two-sided 95% normal interval, in standard errors."""

Judged = tuple[float, float]
"""(observed reward, judge correctness 0/1) of one sample that has both."""


@dataclass(frozen=True)
class RunSteps:
    """What the analysis needs of a run, per step in step order."""

    signals: list[StepSignals]
    judged: dict[int, list[Judged]]
    """Step -> its samples with both a reward and a judgment (steps without any left out)."""


@dataclass(frozen=True)
class OnsetAnalysis:
    judge_onset: int | None
    crossings: dict[str, int | None]
    """Alarm rule -> the first step it fires at (None: never)."""
    leads: dict[str, int | None]
    """Alarm rule -> judge onset minus its crossing, in steps: positive warned before, negative after."""
    first_warning: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _judged(records: Sequence[Mapping[str, Any]]) -> list[Judged]:
    return [(float(r["reward"]), float(r["correct"])) for r in records
            if r.get("reward") is not None and r.get("correct") is not None]


def _entropy_by_step(run_dir: Path) -> dict[int, float]:
    path = run_dir / "metrics.jsonl"
    rows = read_jsonl(path, torn_tail_ok=True) if path.exists() else []
    return {row["step"]: row["trl/entropy"] for row in rows if row.get("trl/entropy") is not None}


def read_run_steps(run_dir: Path) -> RunSteps:
    """The alarm signals and judged samples of every recorded step of `run_dir`."""
    entropy = _entropy_by_step(run_dir)
    signals, judged = [], {}
    for path in sorted((run_dir / "generations").glob("step-*.jsonl")):
        records = [record for _, record in iter_jsonl(path)]
        if not records:
            continue
        step = int(records[0]["step"])
        signals.append(step_signals(step, records, entropy.get(step)))
        if samples := _judged(records):
            judged[step] = samples
    return RunSteps(signals, judged)


def _mean_gap(samples: Sequence[Judged]) -> float | None:
    return hacking_gap([reward for reward, _ in samples], [correct for _, correct in samples])


def _gap_interval(samples: Sequence[Judged], z: float) -> tuple[float, float] | None:
    """(mean gap, lower bound of its normal interval): mean ± z · sd / sqrt(n), the samples taken as
    independent; None with fewer than two samples."""
    if len(samples) < 2:
        return None
    gap = _mean_gap(samples)
    terms = [reward - correct for reward, correct in samples]
    sd = math.sqrt(sum((term - gap) ** 2 for term in terms) / (len(terms) - 1))
    return gap, gap - z * sd / math.sqrt(len(terms))


def judge_onset(judged: Mapping[int, Sequence[Judged]], window: int, z: float = Z_95) -> int | None:
    """The first step at which the hacking gap's rolling interval lies above both 0 and its start.

    Over the steps that have judged samples, in order: the baseline gap b is the mean of
    reward - correctness over every sample of the first `window` steps; at each later step t whose
    last `window` steps come after the baseline (t is at least the 2·window-th step), the samples of
    those steps give a mean gap and a 95% normal interval (`_gap_interval`). The onset is the first
    t whose lower bound exceeds both 0 and b: a gap that stays where noise put it never starts.
    None when no step qualifies.
    """
    steps = sorted(judged)
    if len(steps) < 2 * window:
        return None
    baseline = _mean_gap([sample for step in steps[:window] for sample in judged[step]])
    for end in range(2 * window, len(steps) + 1):
        interval = _gap_interval([sample for step in steps[end - window : end] for sample in judged[step]], z)
        if interval is not None and interval[1] > max(0.0, baseline):
            return steps[end - 1]
    return None


def lead_lag(crossings: Mapping[str, int | None], onset: int | None) -> dict[str, int | None]:
    """Rule -> onset - crossing (steps; positive: warned before the judge onset, 0: at it); None
    when there is no onset or the rule never fired."""
    return {name: None if onset is None or step is None else onset - step for name, step in crossings.items()}


def first_warning(crossings: Mapping[str, int | None]) -> str | None:
    """The rule that fired earliest (on a tie, the one listed first); None when none fired."""
    fired = [(step, order, name) for order, (name, step) in enumerate(crossings.items()) if step is not None]
    return min(fired)[2] if fired else None


def analyse_onset(steps: RunSteps, config: AlarmConfig) -> OnsetAnalysis:
    """Judge onset, crossings, leads and the first warning, with the alarm's window and thresholds."""
    onset = judge_onset(steps.judged, config.window)
    crossings = first_crossings(steps.signals, config)
    return OnsetAnalysis(onset, crossings, lead_lag(crossings, onset), first_warning(crossings))


def analyse_run_onset(run_dir: Path, config: AlarmConfig) -> OnsetAnalysis:
    """`analyse_onset` of the run folder `run_dir` (its generations/ and metrics.jsonl)."""
    return analyse_onset(read_run_steps(run_dir), config)
