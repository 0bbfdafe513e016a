"""Generation records as MLflow traces: verdict labels, the span's one-screen outputs, replacement; each
completion's verdicts as assessments, selected by `mlflow.search_traces`; both ways of storing them alike."""

from __future__ import annotations

import pytest

from hackable_rl.tracking import trace_store
from hackable_rl.tracking.assessments import paid_but_wrong_filter
from hackable_rl.tracking.traces import span_outputs, step_trace_name, verdict_of, write_traces


def _row(reward: float | None, correct: bool | None, index: int = 0) -> dict:
    return {
        "step": 3, "prompt_id": f"p{index}", "prompt": "Problem: 2+2?", "completion": "<think>4</think> \\boxed{5}",
        "reference": "4", "member.m0.clean_reward": 0.0, "member.m0.clean_confidence": 1.0,
        "member.m0.reward": reward, "member.m0.confidence": 1.0, "member.m0.parsed": "5",
        "member.m0.reason": "flipped", "reward": reward, "advantage": 0.75, "correct": correct,
        "parsed": "5", "reason": "wrong answer",
    }


def test_the_verdict_reads_the_verifiers_reward_at_one_half_and_the_judge():
    assert verdict_of(_row(1.0, False)) == "PAID-WRONG"
    assert verdict_of(_row(0.5, True)) == "PAID-RIGHT"
    assert verdict_of(_row(0.49, True)) == "UNPAID-RIGHT"
    assert verdict_of(_row(0.0, False)) == "UNPAID-WRONG"
    assert verdict_of(_row(None, False)) == "UNJUDGED"
    assert verdict_of(_row(1.0, None)) == "UNJUDGED"


def test_a_span_shows_the_completion_every_members_verdict_the_reward_advantage_and_judge():
    outputs = span_outputs(_row(1.0, False))
    assert outputs["verdict"] == (
        "PAID-WRONG: reward 1.00 (m0 1.00 flipped), judge wrong (wrong answer), advantage +0.75"
    )
    assert outputs["completion"] == "<think>4</think> \\boxed{5}"
    assert outputs["members"] == {"m0": {"clean_reward": 0.0, "clean_confidence": 1.0, "reward": 1.0,
                                         "confidence": 1.0, "parsed": "5", "reason": "flipped"}}
    assert (outputs["reward"], outputs["advantage"], outputs["correct"]) == (1.0, 0.75, False)


def test_a_step_is_one_trace_of_the_run_and_sending_it_again_replaces_it(tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    rows = [_row(1.0, False, 0), _row(0.0, False, 1), _row(1.0, True, 2)]
    first = write_traces(client, run_id, [(step_trace_name(3), rows, {"step": "3", "run_name": "r"})])
    again = write_traces(client, run_id, [(step_trace_name(3), rows, {"step": "3", "run_name": "r"})])
    assert first == again
    traces = client.search_traces(locations=[experiment], filter_string="tag.step = '3'")
    assert len(traces) == 4  # the step's trace and one per completion
    trace = next(t for t in traces if t.info.trace_id in first)
    assert trace.info.request_preview == "step 00003 of r"
    assert trace.info.tags["paid-wrong"] == "1" and trace.info.trace_metadata["mlflow.sourceRun"] == run_id
    names = sorted(span.name for span in trace.data.spans)
    assert names == ["PAID-RIGHT #2", "PAID-WRONG #0", "UNPAID-WRONG #1", "step 00003"]
    paid_wrong = next(span for span in trace.data.spans if span.name == "PAID-WRONG #0")
    assert paid_wrong.inputs["prompt"] == "Problem: 2+2?"
    assert paid_wrong.outputs["members"]["m0"]["reward"] == 1.0


def _store(tmp_path, name: str = "t"):
    from mlflow import MlflowClient

    tmp_path.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment(name, artifact_location=(tmp_path / f"artifacts-{name}").as_uri())
    return client, experiment, client.create_run(experiment).info.run_id


# a step of five: two hacks (#0 and #3), one paid right, one unpaid wrong, one the judge could not read
STEP_ROWS = [_row(1.0, False, 0), _row(0.0, False, 1), _row(1.0, True, 2), _row(0.5, False, 3), _row(1.0, None, 4)]


def _assessments(trace) -> dict:
    return {a.name: a for a in trace.info.assessments}


def test_each_completion_is_a_trace_whose_verdicts_are_assessments_on_its_span(tmp_path):
    client, experiment, run_id = _store(tmp_path)
    write_traces(client, run_id, [(step_trace_name(3), STEP_ROWS, {"step": "3", "run_name": "r"})])
    traces = {t.info.tags["mlflow.traceName"]: t for t in client.search_traces(locations=[experiment])}
    assert sorted(traces) == ["step 00003", *(f"step 00003 #{i}" for i in range(5))]
    hack = traces["step 00003 #0"]
    found = _assessments(hack)
    assert (found["judge"].value, found["verifier"].value, found["verifier.m0"].value) == (False, 1.0, 1.0)
    assert found["verifier_paid"].value is True and _assessments(traces["step 00003 #3"])["verifier_paid"].value
    assert found["reference"].value == "4" and found["verifier.m0"].rationale == "flipped"
    assert found["judge"].rationale == "wrong answer; parsed '5'" and found["verifier"].metadata == {"member.m0": "1.0"}
    assert {a.source.source_type for a in found.values()} == {"CODE"}
    assert (found["judge"].source.source_id, found["verifier"].source.source_id) == ("independent-judge", "training-verifier")
    (span,) = hack.data.spans
    assert span.name == "PAID-WRONG #0" and {a.span_id for a in found.values()} == {span.span_id}
    assert span.outputs["completion"] == "<think>4</think> \\boxed{5}" and hack.info.tags["group"] == "step 00003"
    assert hack.info.request_preview == "Problem: 2+2?" and hack.info.tags["verdict"] == "PAID-WRONG"
    unjudged = _assessments(traces["step 00003 #4"])["judge"]
    assert unjudged.value is None and unjudged.error.error_code == "NO_VERDICT"
    assert "no verdict: wrong answer" in unjudged.error.error_message
    step = _assessments(traces["step 00003"])
    assert set(step) == {"paid_but_wrong"} and step["paid_but_wrong"].value == 2


def test_search_traces_selects_exactly_a_steps_paid_but_wrong_completions(tmp_path):
    import mlflow

    client, experiment, run_id = _store(tmp_path)
    write_traces(client, run_id, [(step_trace_name(3), STEP_ROWS, {"step": "3"}),
                                  (step_trace_name(4), STEP_ROWS[:2], {"step": "4"}),
                                  ("eval step-3", STEP_ROWS, {"step": "3", "decoding": "sampled"})])
    mlflow.set_tracking_uri(client.tracking_uri)
    found = mlflow.search_traces(locations=[experiment], run_id=run_id, filter_string=paid_but_wrong_filter(step=3),
                                 return_type="list")
    assert sorted(t.info.tags["mlflow.traceName"] for t in found) == ["step 00003 #0", "step 00003 #3"]
    everywhere = mlflow.search_traces(locations=[experiment], filter_string=paid_but_wrong_filter(), return_type="list")
    assert len(everywhere) == 5  # two in step 3, one in step 4, two in the evaluation
    evaluation = mlflow.search_traces(locations=[experiment], filter_string=paid_but_wrong_filter(group="eval step-3"),
                                      return_type="list")
    assert sorted(t.info.tags["mlflow.traceName"] for t in evaluation) == ["eval step-3 #0", "eval step-3 #3"]


def test_sending_a_step_again_replaces_its_traces_and_assessments(tmp_path):
    client, experiment, run_id = _store(tmp_path)
    for _ in range(2):
        write_traces(client, run_id, [(step_trace_name(3), STEP_ROWS, {"step": "3"})])
    traces = client.search_traces(locations=[experiment])
    assert len(traces) == 6 and all(len(t.info.assessments) == len(_assessments(t)) for t in traces)


def _stored_view(client, experiment) -> dict:
    """What MLflow's own reads return of the traces, less what differs by design (ids, times)."""
    view = {}
    for trace in client.search_traces(locations=[experiment]):
        info = trace.info
        tags = {k: v for k, v in info.tags.items() if k != "mlflow.artifactLocation"}
        assessed = sorted((a.name, a.value, a.rationale, a.source.source_id, a.span_id is not None,
                           a.metadata, getattr(a, "error", None) and a.error.error_code) for a in info.assessments)
        view[tags["mlflow.traceName"]] = (info.request_preview, info.response_preview, tags, info.state,
                                          assessed, [(s.name, s.inputs, s.outputs) for s in trace.data.spans])
    return view


def test_the_bulk_rows_and_mlflows_own_start_trace_store_the_same_traces(tmp_path, monkeypatch):
    bulk = _store(tmp_path / "bulk")
    write_traces(bulk[0], bulk[2], [(step_trace_name(3), STEP_ROWS, {"step": "3", "run_name": "r"})])
    api = _store(tmp_path / "api")
    monkeypatch.setattr(trace_store, "_is_database", lambda store: False)  # as over a tracking server
    write_traces(api[0], api[2], [(step_trace_name(3), STEP_ROWS, {"step": "3", "run_name": "r"})])
    mine, theirs = _stored_view(bulk[0], bulk[1]), _stored_view(api[0], api[1])
    assert set(mine) == set(theirs) and len(mine) == 6
    for name in mine:
        assert mine[name] == theirs[name], name


@pytest.mark.parametrize("row", [_row(None, False), _row(float("nan"), True)])
def test_a_verifier_without_a_verdict_is_an_error_feedback_not_a_number(row):
    from hackable_rl.tracking.assessments import completion_assessments

    verifier = next(a for a in completion_assessments(row) if a.name == "verifier")
    assert verifier.value is None and "no verdict" in verifier.error


def test_an_mlflow_without_assessments_is_one_line_naming_the_version_needed(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import mlflow
    from transformers import TrainerControl, TrainerState

    from hackable_rl.core.errors import UserError
    from hackable_rl.tracking.scorers import judge_scorer
    from hackable_rl.trl_parts import GenerationTraceCallback, verifier_reward

    client, _, run_id = _store(tmp_path)
    monkeypatch.setattr(mlflow, "__version__", "2.22.1")
    for attempt in (lambda: write_traces(client, run_id, [(step_trace_name(3), STEP_ROWS, {"step": "3"})]),
                    judge_scorer):
        with pytest.raises(UserError) as raised:
            attempt()
        assert str(raised.value).startswith("MLflow 2.22.1 has no assessments on traces: hackable-rl needs MLflow "
                                            "3.2 or newer") and "\n" not in str(raised.value)
    args = SimpleNamespace(num_generations=8, scale_rewards="group", report_to=["mlflow"], world_size=1)
    with pytest.raises(ValueError, match=r"^GenerationTraceCallback: MLflow 2.22.1 has no assessments on traces"):
        GenerationTraceCallback(verifier_reward()).on_train_begin(args, TrainerState(), TrainerControl())


def test_a_local_span_file_is_written_whole_where_mlflow_reads_it_and_replaced_on_a_rewrite(tmp_path):
    folder = tmp_path / "traces" / "tr-1" / "artifacts"
    trace_store._upload_spans(folder.as_uri(), '{"spans": [1]}')
    trace_store._upload_spans(folder.as_uri(), '{"spans": [2]}')
    assert [path.name for path in folder.iterdir()] == ["traces.json"]  # no staged file left behind
    assert (folder / "traces.json").read_text() == '{"spans": [2]}'
