"""Generation records as MLflow traces: verdict labels, the span's one-screen outputs, replacement."""

from __future__ import annotations

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
    assert len(traces) == 1
    trace = traces[0]
    assert trace.info.request_preview == "step 00003 of r"
    assert trace.info.tags["paid-wrong"] == "1" and trace.info.trace_metadata["mlflow.sourceRun"] == run_id
    names = sorted(span.name for span in trace.data.spans)
    assert names == ["PAID-RIGHT #2", "PAID-WRONG #0", "UNPAID-WRONG #1", "step 00003"]
    paid_wrong = next(span for span in trace.data.spans if span.name == "PAID-WRONG #0")
    assert paid_wrong.inputs["prompt"] == "Problem: 2+2?"
    assert paid_wrong.outputs["members"]["m0"]["reward"] == 1.0
