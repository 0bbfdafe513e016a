"""The audited monitor: k judged completions per step, and the audited gap the alarm watches.

A researcher training against a verifier they cannot fully trust often has a trusted judge (a person,
a strong model, a slow exact checker) that can look at a few completions per step, never all of
them. With `alarm.audit.k`, each step t:

1. `audit_indices` picks k of the step's n completions, without replacement, with numpy's
   `default_rng([alarm.audit.seed, t])` (positions in the step's generation order, as
   generations/step-t.jsonl holds them), so a rerun and the benchmark's replay audit the same ones;
2. the judge judges those k: by default the run's independent judge, whose verdict every record
   already holds (`correct`: the run judges every completion for analysis, so reading it costs
   nothing here, but it is what a run without the full judge would pay for); with
   `alarm.audit.judge` (or the callback's `audit_judge`) that function is called on each;
3. the **audited gap** is the step's mean training reward (every completion's: the trainer sees them
   all) minus the share of the audited completions the judge calls right. It is an unbiased estimate
   of the step's hacking gap, and its law depends only on the step's counts: the audited right
   answers are hypergeometric (k drawn from n, of which the judge calls c right), so a study's
   committed curve.csv replays it exactly in distribution (`alarm/bench/audit.py`). The paired gap
   (reward minus verdict over the same k) would vary less where the verifier mostly agrees with the
   judge, but its law needs each completion's reward beside its verdict, which the studies did not keep.

The gap goes into the step's alarm.jsonl row as `audit_gap`, and the alarm's audit detector
(`alarm.onset_alarm.audit_detector`) watches it. Each audited completion counts as one judge call
(`alarm/audit_judge_calls` in metrics.jsonl, cumulative). Plain Python plus numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hackable_rl.alarm.onset_alarm import audit_detector
from hackable_rl.config.experiment import AlarmConfig, AuditConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_jsonl
from hackable_rl.core.registry import RegistryError, import_from_path, signature_problem
from hackable_rl.core.stats import mean
from hackable_rl.evaluation.judge import Judgment

__all__ = ["AUDIT_CALLS", "AUDIT_GAP_METRIC", "audit_indices", "verdict", "audited_gap", "StepAudit",
           "audit_firing", "replay_run_folder"]

AUDIT_CALLS = "alarm/audit_judge_calls"
"""The metrics row's cumulative count of the audit's judge calls."""
AUDIT_GAP_METRIC = "alarm/audit_gap"
"""The metrics row's audited gap of the step (absent where no audited completion was judged)."""

Row = Mapping[str, Any]
"""One completion's record as generations/step-t.jsonl holds it (`GenerationRecord.to_json()`)."""
Judge = Callable[[str, str], Any]
"""judge(completion, reference) -> True/False or a Judgment."""


PROBE = ("The answer is 4.", "4")
"""(completion, reference) a judge is asked once before the run: its answer must already be a verdict."""


def audit_indices(seed: int, step: int, completions: int, k: int) -> list[int]:
    """The positions (ascending) of the k completions step `step` audits among its `completions`."""
    return sorted(int(i) for i in np.random.default_rng([seed, step]).choice(completions, size=k, replace=False))


def verdict(value: Any, judge_name: str) -> bool | None:
    """What a judge returned as a verdict: a bool, or a Judgment's `correct` (None: not judged, e.g. a
    reference it cannot parse). Anything else is a UserError naming the judge."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Judgment) and (value.correct is None or isinstance(value.correct, bool)):
        return value.correct
    raise UserError(f"{judge_name}: returned {value!r:.80} for an audited completion; expected a verdict: "
                    "True or False, or a Judgment whose correct is True, False or None")


def audited_gap(rows: Sequence[Row], verdicts: Iterable[bool | None]) -> float | None:
    """The step's mean reward minus the share of the audited completions judged right (None when the
    step has no reward or no audited completion was judged)."""
    judged = [float(value) for value in verdicts if value is not None]
    reward = mean(row.get("reward") for row in rows)
    return None if reward is None or not judged else reward - sum(judged) / len(judged)


def _resolved_judge(path: str) -> Judge:
    """`alarm.audit.judge` loaded and checked for the call the audit makes; a UserError naming it."""
    try:
        judge = import_from_path(path)
    except RegistryError as error:
        raise UserError(f"alarm.audit.judge: {error}") from None
    if problem := signature_problem(judge, "judge(completion, reference)", "completion", "reference"):
        raise UserError(f"alarm.audit.judge: {path!r} {problem}")
    return judge


class StepAudit:
    """A run's live audit: each step's k audited completions -> the audited gap, judge calls counted."""

    def __init__(self, config: AuditConfig, judge: Judge | None = None, judge_name: str = "alarm.audit.judge"):
        if config.k is None:
            raise ValueError("StepAudit needs alarm.audit.k")
        self.k, self.seed, self.judge, self.judge_name = config.k, config.seed, judge, judge_name
        self.calls = 0
        """Judge calls so far (k per audited step); a resume sets it back from alarm.jsonl."""

    @classmethod
    def of(cls, config: AuditConfig, judge: Judge | None = None, judge_name: str = "alarm.audit.judge") -> StepAudit | None:
        """The audit `config` sets (None when `k` is null) with `judge` (named `judge_name` in errors)
        when given, else `config.judge` loaded, else the records' own verdicts; a judge that cannot be
        called as judge(completion, reference) is a UserError naming it."""
        if config.k is None:
            return None
        if judge is None and config.judge is not None:
            judge, judge_name = _resolved_judge(config.judge), f"alarm.audit.judge {config.judge!r}"
        elif judge is not None and (problem := signature_problem(judge, f"{judge_name}(completion, reference)",
                                                                  "completion", "reference")):
            raise UserError(f"{judge_name} {problem}")
        if judge is not None:  # a judge that returns no verdict is refused before the run makes anything
            verdict(judge(*PROBE), judge_name)
        return cls(config, judge, judge_name)

    def audit(self, step: int, rows: Sequence[Row]) -> float | None:
        """The audited gap of step `step`, whose records are `rows` in generation order."""
        if self.k > len(rows):
            raise UserError(f"alarm.audit.k: {self.k} is more than the {len(rows)} completions of step {step}; "
                            "audit at most that many")
        chosen = [rows[index] for index in audit_indices(self.seed, step, len(rows), self.k)]
        verdicts = [self._verdict(row) for row in chosen]
        self.calls += self.k
        return audited_gap(rows, verdicts)

    def _verdict(self, row: Row) -> bool | None:
        if self.judge is None:  # the run's independent judge already judged every completion
            return row.get("correct")
        return verdict(self.judge(row["completion"], row["reference"]), self.judge_name)


def audit_firing(gaps: Iterable[tuple[int, float | None]], config: AlarmConfig) -> int | None:
    """The first step the audit detector of `config` crosses over (step, audited gap) in order."""
    detector = audit_detector(config)
    return next((step for step, gap in gaps if detector.update(step, gap)), None)


def replay_run_folder(run_dir: Path, audit: AuditConfig) -> list[tuple[int, float | None]]:
    """(step, audited gap) of each recorded step of a run folder, as the live audit had it: the same
    positions of each step's records, judged by the same judge (`alarm.audit.judge`, else the records'
    recorded verdicts)."""
    replay = StepAudit.of(audit)
    if replay is None:
        raise ValueError("replay_run_folder needs alarm.audit.k")
    out = []
    for path in sorted((run_dir / "generations").glob("step-*.jsonl")):
        rows = [row for _, row in iter_jsonl(path)]
        if rows:
            out.append((int(rows[0]["step"]), replay.audit(int(rows[0]["step"]), rows)))
    return out
