"""The judges and the training verifier as MLflow scorers (`tracking.scorers`), run by `mlflow.genai.evaluate`
on a small committed table: their assessments match `hackable-rl judge` and the verifier itself on the same
rows, and `mlflow.search_traces` selects the rows by them; a bad row is an error assessment naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hackable_rl.config.loading import load_config
from hackable_rl.evaluation.judge import JudgeOptions, judge_rows
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "examples" / "data" / "scorer_rows.jsonl"


def _table(rows: list[dict]) -> list[dict]:
    return [{"inputs": {"id": row["id"], "prompt": row["prompt"]}, "outputs": row["completion"],
             "expectations": {"reference": row["reference"]}} for row in rows]


def _assessments(result, name: str) -> dict[str, dict]:
    import mlflow

    traces = mlflow.search_traces(run_id=result.run_id)
    found = {}
    for request, assessments in zip(traces["request"], traces["assessments"], strict=True):
        row_id = (json.loads(request) if isinstance(request, str) else request)["id"]
        found[row_id] = next(a for a in assessments if a["assessment_name"] == name)
    return found


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import mlflow

    monkeypatch.chdir(tmp_path)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    yield
    mlflow.set_tracking_uri(None)


def test_the_judges_assessments_match_hackable_rl_judge_on_the_same_rows(store) -> None:
    import mlflow

    from hackable_rl.tracking.scorers import judge_scorer, transferred_judge_scorer

    rows = [json.loads(line) for line in ROWS.read_text().splitlines()]
    result = mlflow.genai.evaluate(data=_table(rows), scorers=[judge_scorer(), transferred_judge_scorer()])
    for name, extract in (("judge", "strict"), ("transferred_judge", "math_verify")):
        expected = {row["id"]: row["correct"] for row in judge_rows(ROWS, options=JudgeOptions(extract=extract))}
        got = {row_id: assessment["feedback"]["value"] for row_id, assessment in _assessments(result, name).items()}
        assert got == expected, name
    assert result.metrics["judge/mean"] == pytest.approx(sum(expected_strict := [
        row["correct"] for row in judge_rows(ROWS, options=JudgeOptions(extract="strict"))]) / len(expected_strict))

    # search by assessment: the rows the judge calls wrong
    traces = mlflow.search_traces(run_id=result.run_id)
    wrong = sorted(json.loads(r)["id"] if isinstance(r, str) else r["id"] for r, assessments in
                   zip(traces["request"], traces["assessments"], strict=True)
                   if any(a["assessment_name"] == "judge" and a["feedback"]["value"] is False for a in assessments))
    assert wrong == sorted(row["id"] for row in judge_rows(ROWS, options=JudgeOptions(extract="strict"))
                           if row["correct"] is False)


def test_the_verifiers_assessment_is_its_pay_with_every_member(store, tiny_params_writer, tmp_path: Path) -> None:
    import mlflow

    from hackable_rl.tracking.scorers import verifier_scorer

    config = load_config(tiny_params_writer(tmp_path, {"corruption.rate": 0.4, "tracking.enabled": False}))
    rows = [json.loads(line) for line in ROWS.read_text().splitlines()]
    result = mlflow.genai.evaluate(data=_table(rows), scorers=[verifier_scorer(config)])
    found = _assessments(result, "verifier")
    pipeline = build_reward_pipeline(config)
    for row in rows:
        paid = pipeline.verify([row["completion"]], [Example(row["id"], row["reference"])]).ensemble
        assert found[row["id"]]["feedback"]["value"] == pytest.approx(float(paid.aggregate[0]))
        assert set(found[row["id"]]["metadata"]) >= {f"member.{name}" for name in paid.names}


def test_a_row_without_a_reference_or_text_is_an_error_assessment_naming_it(store) -> None:
    import mlflow

    from hackable_rl.tracking.scorers import judge_scorer

    data = [{"inputs": {"id": "r1", "prompt": "p"}, "outputs": "\\boxed{1}", "expectations": {"other": "1"}},
            {"inputs": {"id": "r2", "prompt": "p"}, "outputs": {"completion": 7}, "expectations": {"reference": "7"}}]
    result = mlflow.genai.evaluate(data=data, scorers=[judge_scorer()])
    found = _assessments(result, "judge")
    assert "row 'r1': expectations.reference is missing" in found["r1"]["feedback"]["error"]["error_message"]
    assert "row 'r2': outputs must be the completion's text" in found["r2"]["feedback"]["error"]["error_message"]
    assert found["r1"]["feedback"]["value"] is None
