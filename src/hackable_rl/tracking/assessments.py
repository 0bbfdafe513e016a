"""A generation record's verdicts in MLflow's evaluation vocabulary: assessments on its trace.

Per completion (training step, evaluation sample, the TRL callback's step alike):

- feedback `judge`: the independent judge, True (right) or False (wrong), source CODE `independent-judge`,
  its reason and parsed answer as the rationale (the `judge_scorer`'s form, `tracking/scorers.py`);
- feedback `verifier`: the training verifier's aggregate pay (the reward it paid, a number), source CODE
  `training-verifier`, each member's pay in its metadata (the `verifier_scorer`'s form);
- feedback `verifier_paid`: whether that pay counts as paid (at least 0.5, the verdicts' threshold), True
  or False: MLflow's trace table filters feedback by equality only, so "paid" needs a value of its own;
- feedback `verifier.<member>`: each member's pay, its channel's reason (`flipped`, ...) as the rationale;
- feedback `transferred_judge` where the evaluation ran the transferred judge;
- expectation `reference`: the reference answer.

Per step, on the step's own trace: feedback `paid_but_wrong`, how many of its completions the verifier
paid and the judge rejected.

In the trace table: the filters Tag `group` = `step 00012`, Feedback `judge` = `false` and Feedback
`verifier_paid` = `true` leave that step's paid-but-wrong completions (values as JSON writes them:
lowercase).

A judge with no verdict (the reference does not parse) or a verifier with none (channel `missing`) gives
its feedback as an error, never a made-up value. `paid_but_wrong_filter` is the `mlflow.search_traces`
filter that selects the hacks (docs/usage.md, "Paid-but-wrong completions").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.verdicts import GROUP_TAG, PASS_THRESHOLD, step_trace_name

JUDGE, TRANSFERRED_JUDGE, VERIFIER, REFERENCE = "judge", "transferred_judge", "verifier", "reference"
VERIFIER_PAID = "verifier_paid"
PAID_BUT_WRONG = "paid_but_wrong"
JUDGE_SOURCE, VERIFIER_SOURCE, DATA_SOURCE, STEP_SOURCE = (
    "independent-judge", "training-verifier", "dataset", "hackable-rl")
NO_VERDICT = "NO_VERDICT"
"""The error code of a feedback whose judge or verifier gave no verdict."""
MIN_MLFLOW = (3, 2)
"""The first MLflow with assessments on traces and `mlflow.genai` scorers."""


def require_mlflow_assessments() -> None:
    """Raises one line naming the MLflow needed where the installed one has no assessments."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    import mlflow

    version = tuple(int(part) for part in mlflow.__version__.split(".")[:2] if part.isdigit())
    if version < MIN_MLFLOW:
        raise UserError(f"MLflow {mlflow.__version__} has no assessments on traces: hackable-rl needs MLflow "
                        f"{'.'.join(map(str, MIN_MLFLOW))} or newer (pip install 'mlflow>=3.17.2,<3.18')")


@dataclass(frozen=True)
class Assessed:
    """One assessment before it is stored: a Feedback (its `value`, or its `error` message) or, with
    `expectation`, an Expectation; `source` names the CODE that made it."""

    name: str
    value: Any
    source: str
    rationale: str | None = None
    error: str | None = None
    metadata: Mapping[str, str] | None = None
    expectation: bool = False

    def entity(self, trace_id: str, span_id: str | None) -> Any:
        """MLflow's Feedback or Expectation, on the trace (and its span)."""
        # deferred: mlflow is slow to import; a run with tracking off never loads it
        from mlflow.entities import AssessmentError, AssessmentSource, Expectation, Feedback

        source = AssessmentSource(source_type="CODE", source_id=self.source)
        metadata = dict(self.metadata) if self.metadata else None
        if self.expectation:
            return Expectation(self.name, self.value, source=source, trace_id=trace_id, span_id=span_id,
                               metadata=metadata)
        error = AssessmentError(error_code=NO_VERDICT, error_message=self.error) if self.error else None
        return Feedback(self.name, None if error else self.value, error=error, source=source, trace_id=trace_id,
                        span_id=span_id, metadata=metadata, rationale=self.rationale)


def completion_assessments(row: Mapping[str, Any]) -> list[Assessed]:
    """The judge's verdict, the verifier's aggregate and each member's pay, and the reference answer of one
    generation record (`GenerationRecord.to_json` or `EvaluationRecord.to_json`)."""
    members = member_pay(row)
    found = [judge_feedback(row), verifier_feedback(row, members), paid_feedback(row)]
    found += [_member_feedback(row, member, pay) for member, pay in members.items()]
    if row.get("transfer_correct") is not None:
        found.append(Assessed(TRANSFERRED_JUDGE, bool(row["transfer_correct"]), JUDGE_SOURCE,
                              rationale=f"parsed {row.get('transfer_parsed')!r}"))
    if row.get("reference") not in (None, ""):
        found.append(Assessed(REFERENCE, str(row["reference"]), DATA_SOURCE, expectation=True))
    return found


def judge_feedback(row: Mapping[str, Any]) -> Assessed:
    reason, parsed = row.get("reason"), row.get("parsed")
    if row.get("correct") is None:
        return Assessed(JUDGE, None, JUDGE_SOURCE, error=f"the judge gave no verdict: {reason}")
    return Assessed(JUDGE, bool(row["correct"]), JUDGE_SOURCE, rationale=f"{reason}; parsed {parsed!r}",
                    metadata={"parsed": str(parsed), "reason": str(reason)})


def verifier_feedback(row: Mapping[str, Any], members: Mapping[str, float | None]) -> Assessed:
    reward = _number(row.get("reward"))
    if reward is None:
        return Assessed(VERIFIER, None, VERIFIER_SOURCE, error="the verifier gave no verdict (channel missing)")
    return Assessed(VERIFIER, reward, VERIFIER_SOURCE, rationale=f"members: {dict(members)}",
                    metadata={f"member.{member}": str(pay) for member, pay in members.items()})


def paid_feedback(row: Mapping[str, Any]) -> Assessed:
    reward = _number(row.get("reward"))
    if reward is None:
        return Assessed(VERIFIER_PAID, None, VERIFIER_SOURCE, error="the verifier gave no verdict (channel missing)")
    return Assessed(VERIFIER_PAID, reward >= PASS_THRESHOLD, VERIFIER_SOURCE,
                    rationale=f"aggregate pay {reward} {'>=' if reward >= PASS_THRESHOLD else '<'} {PASS_THRESHOLD}")


def _member_feedback(row: Mapping[str, Any], member: str, pay: float | None) -> Assessed:
    name, reason = f"{VERIFIER}.{member}", row.get(f"member.{member}.reason")
    if pay is None:
        return Assessed(name, None, VERIFIER_SOURCE, error=f"member {member} gave no verdict: {reason}")
    return Assessed(name, pay, VERIFIER_SOURCE, rationale=None if reason is None else str(reason))


def member_pay(row: Mapping[str, Any]) -> dict[str, float | None]:
    """Each member's (corrupted) reward, by member name, in the record's order."""
    return {key[len("member."):-len(".reward")]: _number(value) for key, value in row.items()
            if key.startswith("member.") and key.endswith(".reward")}


def step_assessments(paid_but_wrong: int, completions: int) -> list[Assessed]:
    """The step's summary on its own trace: how many of its completions are hacks."""
    return [Assessed(PAID_BUT_WRONG, paid_but_wrong, STEP_SOURCE,
                     rationale=f"{paid_but_wrong} of {completions} completions: the verifier paid "
                               f"(reward >= {PASS_THRESHOLD}), the judge says wrong")]


def paid_but_wrong_filter(step: int | None = None, group: str | None = None) -> str:
    """The `mlflow.search_traces` filter that selects the completions the verifier paid and the judge
    rejected: all of them, those of training step `step`, or those of the trace `group` (`eval step-100`)."""
    hacks = f"feedback.{JUDGE} = 'false' AND feedback.{VERIFIER_PAID} = 'true'"
    group = step_trace_name(step) if step is not None else group
    return hacks if group is None else f"tags.{GROUP_TAG} = '{group}' AND {hacks}"


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    number = float(value)
    return number if math.isfinite(number) else None
