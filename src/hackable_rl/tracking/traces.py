"""Generation records as MLflow traces: one trace per training step, one span per completion.

Why one trace per step, not one per completion: the UI's Traces tab lists traces (one row per
step here, filterable by `step` and by how many completions each verdict has), and a trace's span
tree lists its completions by verdict (`PAID-WRONG #12`), each span showing prompt, full
completion, every member's verdict, the aggregate reward, the advantage and the judge's verdict on
one screen. A trace per completion would let the list filter by verdict directly, but MLflow 3.17
stores a trace with its assessments in about 20 ms (`benchmarks/bench_generation_traces.py`): 64 of
them take 60% of a main-job step. A step's trace, sent with the other steps of its checkpoint, takes
about 1% of one (its spans in one file, `write_traces`).

Trace and span ids are derived from (run id, step, index), so writing a step again (after a resume,
from `hackable-rl sync`) replaces its trace instead of adding a second one. The run folder's
`generations/step-XXXXX.jsonl` stays the source of truth; a trace is a view of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from typing import Any

# The verdict of a completion, from the training verifier's reward (paid: >= 0.5, the threshold every
# false-positive rate here uses) and the independent judge; the label leads each span's name.
PASS_THRESHOLD = 0.5
VERDICTS = {
    (True, False): "PAID-WRONG",  # the hack: the verifier paid, the judge says wrong
    (False, True): "UNPAID-RIGHT",
    (True, True): "PAID-RIGHT",
    (False, False): "UNPAID-WRONG",
}
UNJUDGED = "UNJUDGED"
SPAN_ORDER = ("PAID-WRONG", "UNPAID-RIGHT", "PAID-RIGHT", "UNPAID-WRONG", UNJUDGED)
"""The order of a step's spans: the hack first, then the verifier's other mistake, then the rest (a
span keeps its completion's index in its name)."""

# What a span shows under Outputs besides the completion: the verdicts, in reading order.
_OUTCOME_FIELDS = ("reward", "advantage", "correct", "reason", "parsed", "strict", "optimised_reward", "final_reward")


def verdict_of(row: dict[str, Any]) -> str:
    """PAID-WRONG, PAID-RIGHT, UNPAID-RIGHT, UNPAID-WRONG, or UNJUDGED (no reward or no judgement)."""
    reward, correct = row.get("reward"), row.get("correct")
    if reward is None or correct is None:
        return UNJUDGED
    return VERDICTS[(reward >= PASS_THRESHOLD, bool(correct))]


def span_outputs(row: dict[str, Any]) -> dict[str, Any]:
    """The completion, the aggregate reward, the advantage, the judge's verdict and each member's
    verdict (`member.<name>.*` as one object per member)."""
    members: dict[str, dict[str, Any]] = {}
    for key, value in row.items():
        if key.startswith("member."):
            name, field = key[len("member."):].rsplit(".", 1)
            members.setdefault(name, {})[field] = value
    return {
        "verdict": verdict_line(row, members), "completion": row.get("completion"),
        **{key: row[key] for key in _OUTCOME_FIELDS if key in row}, "members": members,
    }


def verdict_line(row: dict[str, Any], members: dict[str, dict[str, Any]]) -> str:
    """One line: `PAID-WRONG: reward 1.0 (m0 1.0 flipped), judge wrong (not strict format), advantage +0.75`."""
    seen = ", ".join(f"{name} {_number(fields.get('reward'))} {fields.get('reason')}" for name, fields in members.items())
    judge = {True: "right", False: "wrong", None: "unjudged"}[row.get("correct")]
    advantage = row.get("advantage")
    shown = "none" if advantage is None else f"{advantage:+.2f}"
    return (f"{verdict_of(row)}: reward {_number(row.get('reward'))} ({seen}), judge {judge} ({row.get('reason')}), "
            f"advantage {shown}")


def _number(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"


def trace_id_of(run_id: str, name: str) -> str:
    """MLflow's trace id (`tr-` and 32 hex digits) for the trace `name` of a run: the same every time."""
    return "tr-" + _digest(f"{run_id}/{name}", 16).hex()


def _digest(text: str, size: int) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:size]


def _span(trace_id: str, span_id: bytes, parent: bytes | None, name: str, time_ns: int,
          inputs: Any, outputs: Any) -> dict[str, Any]:
    """One span as MLflow stores it in a trace's data file (`Span.to_dict`'s format)."""
    otel_id = base64.b64encode(bytes.fromhex(trace_id[3:])).decode()
    return {
        "trace_id": otel_id, "span_id": base64.b64encode(span_id).decode(),
        "parent_span_id": base64.b64encode(parent).decode() if parent else None, "name": name,
        "start_time_unix_nano": time_ns, "end_time_unix_nano": time_ns, "events": [], "links": [],
        "status": {"code": "STATUS_CODE_OK", "message": ""},
        "attributes": {"mlflow.traceRequestId": json.dumps(trace_id), "mlflow.spanType": json.dumps("LLM"),
                       "mlflow.spanInputs": json.dumps(inputs), "mlflow.spanOutputs": json.dumps(outputs)},
    }


def step_trace(
    run_id: str, experiment_id: str, name: str, rows: list[dict[str, Any]], tags: dict[str, str], time_ms: int
) -> tuple[Any, list[dict[str, Any]]]:
    """The TraceInfo and spans (stored form) of one trace: a root span `name` whose output counts the verdicts,
    and one child span per row (`<VERDICT> #<index>`, grouped in SPAN_ORDER), inputs the prompt, outputs
    `span_outputs`."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    trace_id = trace_id_of(run_id, name)
    counts = Counter(verdict_of(row) for row in rows)
    summary = {verdict: counts.get(verdict, 0) for verdict in [*VERDICTS.values(), UNJUDGED]}
    root_id, time_ns = _digest(f"{trace_id}/root", 8), time_ms * 1_000_000
    spans = [_span(trace_id, root_id, None, name, time_ns, {**tags, "completions": len(rows)}, summary)]
    for index, row in sorted(enumerate(rows), key=lambda pair: SPAN_ORDER.index(verdict_of(pair[1]))):
        inputs = {"prompt_id": row.get("prompt_id"), "prompt": row.get("prompt"), "reference": row.get("reference")}
        spans.append(_span(trace_id, _digest(f"{trace_id}/{index}", 8), root_id, f"{verdict_of(row)} #{index}",
                           time_ns, inputs, span_outputs(row)))
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id), request_time=time_ms,
        state=TraceState.OK, execution_duration=0, request_preview=f"{name} of {tags.get('run_name', run_id)}",
        response_preview=" · ".join(f"{verdict} {count}" for verdict, count in summary.items()),
        trace_metadata={"mlflow.sourceRun": run_id, "mlflow.trace_schema.version": "3"},
        tags={**tags, "mlflow.traceName": name, **{verdict.lower(): str(count) for verdict, count in summary.items()}},
    )
    return info, spans


def write_traces(client: Any, run_id: str, traces: list[tuple[str, list[dict[str, Any]], dict[str, str]]]) -> list[str]:
    """Stores each (name, rows, tags) as the trace `name` of the run, replacing an earlier one of that
    name; returns their ids.

    Each trace is its row in the store (name, previews, tags: what the Traces list shows and filters
    on) and one JSON file of spans in the trace's artifact folder, which the UI reads when a trace is
    opened. Why not the store's span table (`log_spans`): it costs about 1 ms a span (a SQL row each,
    and MLflow's per-span translation), 4.4% of a main-job step against 1.0% for one file per step
    (`benchmarks/bench_generation_traces.py`). The price: the Traces list's search box matches span
    text in the store, so it finds none of these; the list's tag filters (`step`, verdicts) do."""
    import time

    from mlflow.tracing.client import TracingClient

    experiment_id = client.get_run(run_id).info.experiment_id
    tracing = TracingClient(client.tracking_uri)
    now_ms = int(time.time() * 1000)
    # A millisecond apart in the order sent (steps ascending): the Traces list, newest first, then
    # shows each flush's latest step on top, so a run's last step is among the first rows.
    built = [step_trace(run_id, experiment_id, name, rows, tags, now_ms + position)
             for position, (name, rows, tags) in enumerate(traces)]
    if built:  # a step sent again (a resume, `sync`): the store holds each trace once
        tracing.delete_traces(experiment_id, trace_ids=[info.trace_id for info, _ in built])
    for info, spans in built:
        _upload_spans(tracing.start_trace(info), spans)
    return [info.trace_id for info, _ in built]


def _upload_spans(stored_info: Any, spans: list[dict[str, Any]]) -> None:
    """The trace's spans as its data file, where the store's answer to `start_trace` says it lives."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.tracing.utils.artifact_utils import get_artifact_uri_for_trace

    get_artifact_repository(get_artifact_uri_for_trace(stored_info)).upload_trace_data(json.dumps({"spans": spans}))


def step_trace_name(step: int) -> str:
    """`step 00100`: zero-padded, so the list's name order is step order."""
    return f"step {step:05d}"
