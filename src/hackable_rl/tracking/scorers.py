"""The project's judges and training verifier as MLflow scorers, so `mlflow.genai.evaluate` judges any table
of prompts, completions and references (another system's outputs included) and keeps each verdict as an
MLflow assessment on the row's trace.

    import mlflow
    from hackable_rl.tracking.scorers import judge_scorer, transferred_judge_scorer, verifier_scorer

    rows = [{"inputs": {"id": "q1", "prompt": "..."}, "outputs": "... \\boxed{72}",
             "expectations": {"reference": "72"}}]
    mlflow.genai.evaluate(data=rows, scorers=[judge_scorer(), transferred_judge_scorer(), verifier_scorer(config)])

A row gives the completion as `outputs` (text, or `{"completion": text}`), the reference as
`expectations.reference`, and, for the verifier, a stable `inputs.id` (its corruption hashes the id with
the completion, as in training). Each scorer returns Feedback: the judges' verdict (True/False; None where
the reference does not parse) with the extracted answer and the reason as its rationale, the verifier's
aggregate pay with every member's pay in its metadata. A row without a reference, or whose completion is
not text, gets MLflow's error assessment naming the row and the field, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from hackable_rl.evaluation.judge import JudgeOptions, judge_completion
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example
from hackable_rl.tracking.assessments import MIN_MLFLOW, require_mlflow_assessments

__all__ = ["MIN_MLFLOW", "judge_scorer", "transferred_judge_scorer", "verifier_scorer"]

def _mlflow_parts() -> tuple[Any, Any, Any]:
    """(scorer, Feedback, AssessmentError), or one line naming the MLflow version needed (MIN_MLFLOW:
    the first with `mlflow.genai.scorers.scorer` and assessments on traces)."""
    require_mlflow_assessments()
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.entities import AssessmentError, Feedback
    from mlflow.genai.scorers import scorer

    return scorer, Feedback, AssessmentError


def _row_name(inputs: Any) -> str:
    """How an error assessment names its row: its id, else the start of its prompt."""
    if isinstance(inputs, Mapping):
        if inputs.get("id") is not None:
            return f"row {inputs['id']!r}"
        if isinstance(inputs.get("prompt"), str):
            return f"row with prompt {inputs['prompt'][:40]!r}"
    return "a row"


def _completion_and_reference(inputs: Any, outputs: Any, expectations: Any) -> tuple[str, str] | str:
    """(completion, reference), or the problem naming the row and field."""
    completion = outputs.get("completion") if isinstance(outputs, Mapping) else outputs
    if not isinstance(completion, str):
        return f"{_row_name(inputs)}: outputs must be the completion's text (or {{completion: text}}), got " \
               f"{type(completion).__name__}"
    reference = expectations.get("reference") if isinstance(expectations, Mapping) else None
    if isinstance(reference, int | float) and not isinstance(reference, bool):
        reference = str(reference)
    if not isinstance(reference, str) or not reference.strip():
        return f"{_row_name(inputs)}: expectations.reference is missing or not text; give each row its reference answer"
    return completion, reference


def _judge(name: str, options: JudgeOptions) -> Callable[..., Any]:
    scorer, Feedback, AssessmentError = _mlflow_parts()

    def judge(inputs: Any = None, outputs: Any = None, expectations: Any = None) -> Any:
        found = _completion_and_reference(inputs, outputs, expectations)
        if isinstance(found, str):
            return Feedback(name=name, error=AssessmentError(error_code="BAD_ROW", error_message=found))
        judgment = judge_completion(*found, **asdict(options))
        return Feedback(name=name, value=judgment.correct, rationale=f"{judgment.reason}; parsed {judgment.parsed!r}",
                        metadata={"parsed": str(judgment.parsed), "reason": judgment.reason})

    judge.__name__ = name
    return scorer(name=name)(judge)


STRICT = JudgeOptions(extract="strict")
"""The judge's default reading: the training format (`hackable-rl judge --extract strict`)."""


def judge_scorer(options: JudgeOptions = STRICT, name: str = "judge") -> Any:
    """The independent judge (`hackable-rl judge`, strict by default) as an MLflow scorer."""
    return _judge(name, options)


def transferred_judge_scorer(name: str = "transferred_judge") -> Any:
    """The transferred judge (math-verify's own extraction and equivalence) as an MLflow scorer."""
    return _judge(name, JudgeOptions(extract="math_verify"))


def verifier_scorer(config: Any, name: str = "verifier") -> Any:
    """The configured training verifier (its members, corruption and aggregation: a noisy ensemble
    included) as an MLflow scorer: its aggregate pay as the value, each member's in the metadata."""
    scorer, Feedback, AssessmentError = _mlflow_parts()
    pipeline = build_reward_pipeline(config)

    def verifier_pay(inputs: Any = None, outputs: Any = None, expectations: Any = None) -> Any:
        found = _completion_and_reference(inputs, outputs, expectations)
        if isinstance(found, str):
            return Feedback(name=name, error=AssessmentError(error_code="BAD_ROW", error_message=found))
        if not isinstance(inputs, Mapping) or inputs.get("id") is None:
            problem = f"{_row_name(inputs)}: inputs.id is missing; the verifier's corruption is keyed by a stable id"
            return Feedback(name=name, error=AssessmentError(error_code="BAD_ROW", error_message=problem))
        paid = pipeline.verify([found[0]], [Example(str(inputs["id"]), found[1])]).ensemble
        members = {member: _number(paid.rewards[0][index]) for index, member in enumerate(paid.names)}
        return Feedback(name=name, value=_number(paid.aggregate[0]), rationale=f"members: {members}",
                        metadata={f"member.{member}": str(value) for member, value in members.items()})

    verifier_pay.__name__ = name
    return scorer(name=name)(verifier_pay)


def _number(value: Any) -> float | None:
    value = float(value)
    return None if value != value else value  # NaN: the member gave no reward
