"""Storing built traces: each its row in the tracking store (name, previews, tags, metadata, assessments)
and its spans as one JSON file in its artifact folder, which the UI reads when the trace is opened.

Two ways to the same stored traces, by store:

- a database store (`sqlite:///...`, `postgresql://...`: what `hackable-rl` runs log to): every row of a
  flush's traces in one transaction of bulk INSERTs (`_insert_rows`), the rows `SqlAlchemyStore.start_trace`
  would write one trace and one transaction at a time. That API path costs about 20 ms a trace with its
  assessments (`benchmarks/bench_generation_traces.py`): 64 completions a step would take 60% of a
  main-job step. In bulk, a row costs what its INSERT does (`benchmarks/bench_assessments.py` measures a
  step's share). MLflow's schema is pinned with its version (`mlflow>=3.17.2,<3.18`);
  `tests/test_generation_traces.py` checks that both ways store what MLflow's own reads return alike.
- any other store (a tracking server over REST): MLflow's `start_trace` per trace, its assessments
  inside its TraceInfo (one request each, with no bulk alternative in MLflow's REST API).

Either way a trace the store already holds is deleted first, so a resume or a `sync` replaces it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.tracking.assessments import Assessed

_SCHEMA_OF = "3.17."
"""The MLflow release whose tables `_insert_rows` writes (pyproject pins it); another one goes through its API."""
_CHUNK = 500
"""Trace ids per DELETE: far under any database's limit on bound parameters."""


@dataclass(frozen=True)
class TraceToStore:
    """A trace before it is stored: its TraceInfo (without assessments), its spans in stored form
    (`Span.to_dict`), and its assessments, on the span `span_id` (hex) where one is given."""

    info: Any
    spans: list[dict[str, Any]]
    assessments: list[Assessed]
    span_id: str | None = None


def store_traces(tracing: Any, experiment_id: str, traces: list[TraceToStore]) -> None:
    """Replaces the store's traces of these ids with `traces`, rows and span files."""
    ids = [trace.info.trace_id for trace in traces]
    for first in range(0, len(ids), _CHUNK):
        tracing.delete_traces(experiment_id, trace_ids=ids[first : first + _CHUNK])
    if _is_database(tracing.store):
        locations = _insert_rows(tracing.store, experiment_id, traces)
    else:
        locations = [_start_trace(tracing, trace) for trace in traces]
    for location, trace in zip(locations, traces, strict=True):
        _upload_spans(location, json.dumps({"spans": trace.spans}))


def _upload_spans(location: str, data: str) -> None:
    """The trace's data file (`traces.json`, what MLflow's `upload_trace_data` writes) in its artifact folder.

    A local folder (`file:`, where `hackable-rl` runs keep artifacts) is written directly: MLflow's
    repository writes a temporary folder's copy and a staged copy of each file, and checks its path,
    about half of a step's logging (`benchmarks/bench_assessments.py`). The file is written beside its
    name and renamed, so a reader never sees part of one. Any other store (a tracking server's
    `mlflow-artifacts:`, a bucket) goes through MLflow's repository."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.tracing.utils.artifact_utils import TRACE_DATA_FILE_NAME
    from mlflow.utils.file_utils import local_file_uri_to_path
    from mlflow.utils.uri import is_local_uri

    if is_local_uri(location):
        folder = Path(local_file_uri_to_path(location))
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".{TRACE_DATA_FILE_NAME}.partial"
        staged.write_text(data, encoding="utf-8")
        staged.replace(folder / TRACE_DATA_FILE_NAME)
    else:
        get_artifact_repository(location).upload_trace_data(data)


def _is_database(store: Any) -> bool:
    """A database store of the MLflow whose schema the bulk rows follow (any other: MLflow's API)."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    import mlflow
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    return isinstance(store, SqlAlchemyStore) and mlflow.__version__.startswith(_SCHEMA_OF)


def _start_trace(tracing: Any, trace: TraceToStore) -> str:
    """MLflow's API: the trace with its assessments, one request; returns its artifact folder."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.tracing.utils.artifact_utils import get_artifact_uri_for_trace

    trace_id = trace.info.trace_id
    trace.info.assessments = [assessed.entity(trace_id, trace.span_id) for assessed in trace.assessments]
    return get_artifact_uri_for_trace(tracing.start_trace(trace.info))


def _insert_rows(store: Any, experiment_id: str, traces: list[TraceToStore]) -> list[str]:
    """Every trace's rows in one transaction; returns each trace's artifact folder."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.store.tracking.dbmodels import models
    from mlflow.store.tracking.utils.sql_trace_rollups import RollupFamily, enqueue_rollup_rebuild_partitions

    folder_of = _trace_folder(store.get_experiment(experiment_id).artifact_location)
    locations = [folder_of(trace.info.trace_id) for trace in traces]
    tables = [(models.SqlTraceInfo, [_info_row(t.info) for t in traces]),
              (models.SqlTraceTag, list(_tag_rows(traces, locations))),
              (models.SqlTraceMetadata, list(_metadata_rows(traces))),
              (models.SqlAssessments, list(_assessment_rows(traces)))]
    times = [trace.info.request_time for trace in traces]
    with store.ManagedSessionMaker(read_only=False) as session:
        enqueue_rollup_rebuild_partitions(  # what start_trace does for each trace (a no-op unless rollups are on)
            session, [(family, int(experiment_id), times) for family in (RollupFamily.TRACE_METRIC,
                                                                        RollupFamily.ASSESSMENT)])
        for model, rows in tables:
            if rows:
                session.execute(model.__table__.insert(), rows)
    return locations


def _trace_folder(artifact_location: str) -> Any:
    """trace id -> its artifact folder, where `SqlAlchemyStore.start_trace` puts it."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.utils.uri import append_to_uri_path

    return lambda trace_id: append_to_uri_path(artifact_location, SqlAlchemyStore.TRACE_FOLDER_NAME, trace_id,
                                               SqlAlchemyStore.ARTIFACTS_FOLDER_NAME)


def _info_row(info: Any) -> dict[str, Any]:
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.tracing.constant import TraceTagKey

    return {"request_id": info.trace_id, "experiment_id": int(info.experiment_id), "timestamp_ms": info.request_time,
            "execution_time_ms": info.execution_duration, "status": info.state.value, "client_request_id": None,
            "request_preview": info.request_preview, "response_preview": info.response_preview,
            "trace_name": info.tags.get(TraceTagKey.TRACE_NAME)}


def _tag_rows(traces: list[TraceToStore], locations: list[str]) -> Iterator[dict[str, Any]]:
    """Each trace's tags (its name is a column of its own) and where its span file lives."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.tracing.constant import TraceTagKey
    from mlflow.utils.mlflow_tags import MLFLOW_ARTIFACT_LOCATION

    for trace, location in zip(traces, locations, strict=True):
        trace_id = trace.info.trace_id
        for key, value in trace.info.tags.items():
            if key != TraceTagKey.TRACE_NAME:
                yield {"request_id": trace_id, "key": key, "value": value}
        yield {"request_id": trace_id, "key": MLFLOW_ARTIFACT_LOCATION, "value": location}


def _metadata_rows(traces: list[TraceToStore]) -> Iterator[dict[str, Any]]:
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.tracing.constant import TraceMetadataKey

    for trace in traces:
        metadata = {**trace.info.trace_metadata, TraceMetadataKey.TRACE_INFO_FINALIZED: "true"}
        for key, value in sorted(metadata.items()):
            yield {"request_id": trace.info.trace_id, "key": key, "value": value}


def _assessment_rows(traces: list[TraceToStore]) -> Iterator[dict[str, Any]]:
    """Each assessment as `SqlAssessments.from_mlflow_entity` stores it."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.store.tracking.utils.trace_analytics import assessment_aggregate
    from mlflow.tracing.utils import generate_assessment_id

    for trace in traces:
        info = trace.info
        for assessed in trace.assessments:
            aggregate, numeric = assessment_aggregate(assessed.value)
            yield {
                "assessment_id": generate_assessment_id(), "trace_id": info.trace_id, "name": assessed.name,
                "assessment_type": "expectation" if assessed.expectation else "feedback",
                "value": json.dumps(assessed.value), "error": _error_json(assessed),
                "created_timestamp": info.request_time, "last_updated_timestamp": info.request_time,
                "experiment_id": int(info.experiment_id), "trace_timestamp_ms": info.request_time,
                "aggregate_value": aggregate, "is_numeric_value": numeric, "source_type": "CODE",
                "source_id": assessed.source, "run_id": None, "span_id": trace.span_id,
                "rationale": assessed.rationale, "overrides": None, "valid": True,
                "assessment_metadata": json.dumps(dict(assessed.metadata)) if assessed.metadata else None,
            }


def _error_json(assessed: Assessed) -> str | None:
    # deferred: the tracking stack (mlflow) loads only where a run is tracked
    from hackable_rl.tracking.assessments import NO_VERDICT

    if assessed.error is None:
        return None
    return json.dumps({"error_code": NO_VERDICT, "error_message": assessed.error, "stack_trace": None})
