"""Generation records as MLflow traces: per step, one trace of the step and one trace per completion.

    step 00012                 the step: one span per completion, named by its verdict (`PAID-WRONG #3`,
                               the hacks first), its assessment `paid_but_wrong` counting them
    step 00012 #3, #4, ...     each completion: its span, and its verdicts as assessments (the judge's
                               `judge`, the verifier's `verifier` (and `verifier_paid`) and
                               `verifier.<member>` pay, the expectation `reference`: `tracking/assessments.py`)

Why a trace per completion carries the assessments, not a span of the step's trace: MLflow's trace table
lists traces, shows each assessment name as a column of its trace's row and filters rows by assessment
value. Assessments on the spans of one step trace would all land on that one row (a filter could only
keep or drop the whole step); on a trace per completion, `judge = false` and `verifier_paid = true` with
the tag `group = step 00012` leave exactly the step's paid-but-wrong completions, in the UI and in
`mlflow.search_traces` (`assessments.paid_but_wrong_filter`). The step's trace stays for reading a step
on one screen, and carries only its summary, under a name no completion uses, so the filters never
match it.

Why cheaply: MLflow's API stores a trace with its assessments in about 20 ms (one transaction each,
`benchmarks/bench_generation_traces.py`): 64 completions would take 60% of a main-job step. So a flush's
traces go to a database store in one transaction of bulk INSERTs, and each trace's spans as one JSON
file in its artifact folder, which the UI reads when the trace is opened (`tracking/trace_store.py`;
the store's span table would cost about 1 ms a span). The price of the span files: the Traces list's
full-text search, which matches span text in the store, finds none of these; every tag and assessment
filter works. `benchmarks/bench_assessments.py` measures a step's logging against a tiny-policy step.

Trace and span ids are derived from (run id, trace name, index), and a trace the store already holds
is replaced, so writing a step again (after a resume, from `hackable-rl sync`) adds nothing. The run
folder's `generations/step-XXXXX.jsonl` stays the source of truth; a trace is a view of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import Counter
from typing import Any

from hackable_rl.data.prompting import PROMPT_PREFIX
from hackable_rl.tracking.assessments import (
    completion_assessments,
    require_mlflow_assessments,
    step_assessments,
)
from hackable_rl.tracking.trace_store import TraceToStore, store_traces
from hackable_rl.tracking.verdicts import (
    GROUP_TAG,
    PASS_THRESHOLD,
    SPAN_ORDER,
    UNJUDGED,
    VERDICTS,
    step_trace_name,
    verdict_of,
)

__all__ = ["PASS_THRESHOLD", "SPAN_ORDER", "UNJUDGED", "VERDICTS", "span_outputs", "step_trace",
           "step_trace_name", "verdict_of", "write_traces"]

_PREVIEW = 1000
"""Characters of a trace's request and response previews (MLflow's columns hold 1,000)."""
_COMPLETION_TAGS = ("step", "decoding", "run_name")
"""The step's tags a completion's trace repeats, beside its group and verdict."""

# What a span shows under Outputs besides the completion: the verdicts, in reading order.
_OUTCOME_FIELDS = ("reward", "advantage", "correct", "reason", "parsed", "strict", "optimised_reward", "final_reward")


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
    """The TraceInfo and spans (stored form) of a step's trace: a root span `name` whose output counts the
    verdicts, and one child span per row (`<VERDICT> #<index>`, grouped in SPAN_ORDER), inputs the prompt,
    outputs `span_outputs`."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    trace_id = trace_id_of(run_id, name)
    counts = Counter(verdict_of(row) for row in rows)
    summary = {verdict: counts.get(verdict, 0) for verdict in [*VERDICTS.values(), UNJUDGED]}
    root_id, time_ns = _digest(f"{trace_id}/root", 8), time_ms * 1_000_000
    spans = [_span(trace_id, root_id, None, name, time_ns, {**tags, "completions": len(rows)}, summary)]
    for index, row in _in_span_order(rows):
        spans.append(_span(trace_id, _digest(f"{trace_id}/{index}", 8), root_id, f"{verdict_of(row)} #{index}",
                           time_ns, _span_inputs(row), span_outputs(row)))
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id), request_time=time_ms,
        state=TraceState.OK, execution_duration=0, request_preview=f"{name} of {tags.get('run_name', run_id)}",
        response_preview=" · ".join(f"{verdict} {count}" for verdict, count in summary.items()),
        trace_metadata=_metadata(run_id),
        tags={**tags, "mlflow.traceName": name, **{verdict.lower(): str(count) for verdict, count in summary.items()}},
    )
    return info, spans


def completion_trace(run_id: str, experiment_id: str, name: str, index: int, row: dict[str, Any],
                     tags: dict[str, str], time_ms: int) -> TraceToStore:
    """The trace `<name> #<index>` of one completion: one span (`<VERDICT> #<index>`: prompt in, completion
    and verdicts out), its verdicts as assessments on that span, tagged with its step's trace (`group`)."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    own_name, verdict = f"{name} #{index}", verdict_of(row)
    trace_id, span_id = trace_id_of(run_id, own_name), _digest(f"{run_id}/{name}/{index}", 8)
    span = _span(trace_id, span_id, None, f"{verdict} #{index}", time_ms * 1_000_000, _span_inputs(row),
                 span_outputs(row))
    shown = {key: tags[key] for key in _COMPLETION_TAGS if key in tags}
    info = TraceInfo(
        trace_id=trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id), request_time=time_ms,
        state=TraceState.OK, execution_duration=0, request_preview=_prompt_preview(row.get("prompt")),
        response_preview=_storable(str(row.get("completion")))[:_PREVIEW], trace_metadata=_metadata(run_id),
        tags={**shown, "mlflow.traceName": own_name, GROUP_TAG: name, "verdict": verdict},
    )
    return TraceToStore(info, [span], completion_assessments(row), span_id.hex())


def _prompt_preview(prompt: Any) -> str:
    """The prompt as the table's Input column shows it: without the format instructions every prompt
    shares, so the column starts with the problem."""
    return _storable(" ".join(str(prompt).replace(PROMPT_PREFIX, "").split()))[:_PREVIEW]


def _storable(text: str) -> str:
    """`text` with each NUL character written `\\x00`: PostgreSQL's text columns refuse the character
    itself (the store answers 500 and the run goes offline), and a byte-level policy samples it."""
    return text.replace("\x00", "\\x00")


def _span_inputs(row: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_id": row.get("prompt_id"), "prompt": row.get("prompt"), "reference": row.get("reference")}


def _metadata(run_id: str) -> dict[str, str]:
    """What lists a trace under its run's Traces tab."""
    return {"mlflow.sourceRun": run_id, "mlflow.trace_schema.version": "3"}


def _in_span_order(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(index, row), the hacks first (SPAN_ORDER), each keeping its index among the step's rows."""
    return sorted(enumerate(rows), key=lambda pair: SPAN_ORDER.index(verdict_of(pair[1])))


def write_traces(client: Any, run_id: str, traces: list[tuple[str, list[dict[str, Any]], dict[str, str]]]) -> list[str]:
    """Stores each (name, rows, tags) as the run's trace `name` and one trace per row (`name #i`),
    replacing earlier ones of those names; returns the ids of the step traces.

    Times: within a flush, each step's completions and then the step's trace a millisecond apart, steps
    ascending. The Traces list, newest first, then shows each step's trace above its completions, the
    hacks first among them, and a flush's latest step on top."""

    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.tracing.client import TracingClient

    require_mlflow_assessments()
    experiment_id = client.get_run(run_id).info.experiment_id
    clock = int(time.time() * 1000)
    built: list[TraceToStore] = []
    step_ids: list[str] = []
    for name, rows, tags in traces:
        for offset, (index, row) in enumerate(reversed(_in_span_order(rows))):
            built.append(completion_trace(run_id, experiment_id, name, index, row, tags, clock + offset))
        clock += len(rows)
        info, spans = step_trace(run_id, experiment_id, name, rows, tags, clock)
        paid_wrong = sum(verdict_of(row) == "PAID-WRONG" for row in rows)
        built.append(TraceToStore(info, spans, step_assessments(paid_wrong, len(rows))))
        step_ids.append(info.trace_id)
        clock += 1
    if built:
        store_traces(TracingClient(client.tracking_uri), experiment_id, built)
    return step_ids
