"""The tracker every stage logs through: MLflow when reachable, and always a local event log.

Only `tracking/` imports mlflow. A stage opens a tracker with `open_tracker(...)` and never
branches on whether tracking is on: when it is off the tracker only writes the local event log
(or nothing); when the store is unreachable it warns once, keeps writing the event log, and
`hackable-rl sync RUN_DIR` replays what MLflow missed. Nothing is lost.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import math
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hackable_rl.core.jsonl import append_jsonl, read_jsonl
from hackable_rl.tracking.client_calls import (
    _NOTE_TAG,
    _log_batch,
    _log_input,
    _param_text,
    with_section,
)
from hackable_rl.tracking.store import (
    masked_uri,
)
from hackable_rl.tracking.tables import write_table
from hackable_rl.tracking.traces import write_traces
from hackable_rl.tracking.versions import VERSION_FILE, CheckpointVersion

log = logging.getLogger(__name__)

EVENT_LOG_NAME = "tracking-events.jsonl"


def tracking_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the store is down", not "the code is wrong"."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    return (MlflowException, OSError, SQLAlchemyError, TimeoutError)


# What a store answers when it works and refuses the request: going offline would only hide the
# mistake (the run would sync into the same refusal later). Anything else (no answer, a 5xx, a lock)
# is an outage.
_REFUSALS = frozenset({"INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST", "PERMISSION_DENIED",
                       "UNAUTHENTICATED", "INVALID_STATE", "RESOURCE_ALREADY_EXISTS"})


def is_refusal(error: BaseException) -> bool:
    return getattr(error, "error_code", None) in _REFUSALS


# Out of space, out of quota, or past the file-size limit (`ulimit -f`): training.disk_full.NO_SPACE, a
# floor above this one.
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _out_of_space(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from or during, is the OS refusing a write for space."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in _NO_SPACE:
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def _local_folder(uri: str) -> Path | None:
    """The folder a `file:` artifact URI names; None for a server's or a cloud store's."""
    parts = urllib.parse.urlparse(uri)
    return Path(urllib.request.url2pathname(parts.path)) if parts.scheme in ("", "file") else None


def _finite_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """MLflow stores floats: undefined metrics (None, NaN) are left out, never logged as 0."""
    kept = {}
    for key, value in metrics.items():
        if value is None or isinstance(value, bool):
            continue
        number = float(value)
        if math.isfinite(number):
            kept[key] = number
    return kept


class Tracker:
    """Logs one run. `online` is False when MLflow is off or unreachable; events still reach `event_log`."""

    def __init__(
        self, client: Any | None, run_id: str | None, event_log: Path | None, uri: str | None, owns_run: bool = True
    ):
        self.client = client
        self.run_id = run_id
        self.event_log = event_log
        self.uri = uri
        self.owns_run = owns_run  # False: logs into someone else's run and never ends it
        self.failure: str | None = None  # what switched the tracker offline, as one line
        self.warn_offline = True  # False: the caller reports `failure` itself (`sync`, whose error says what remains)
        self._warned = False
        self._system_metrics: Any | None = None

    @property
    def online(self) -> bool:
        return self.client is not None and self.run_id is not None

    @property
    def shown_uri(self) -> str | None:
        """The store's URI as messages and run.json show it: credentials masked."""
        return None if self.uri is None else masked_uri(self.uri)

    # ---- the one place that talks to MLflow: failures switch the tracker offline, once
    def _send(self, action: str, call: Any) -> bool:
        if not self.online:
            return False
        try:
            call()
            return True
        except tracking_errors() as error:
            no_space = self._no_space_detail(error)
            self.failure = masked_uri(f"{action}: {no_space or f'{type(error).__name__}: {error}'}".splitlines()[0])
            if self.warn_offline and not self._warned:
                log.warning(
                    "MLflow at %s failed during %s (%s); continuing offline. Everything is kept in %s; "
                    "%supload it later with `hackable-rl sync %s`.",
                    self.shown_uri, action, no_space or masked_uri(str(error)), self.event_log,
                    "free space there, then " if no_space else "", self.event_log.parent if self.event_log else "RUN_DIR",
                )
                self._warned = True
            self.client = None
            return False

    def _no_space_detail(self, error: BaseException) -> str | None:
        """For a write the run's artifact folder had no room for (a store on this machine: a SQLite
        store's artifacts), that folder and its free space, as one phrase; None for any other failure.
        The OS error names the source file, or nothing: the folder comes from the run itself."""
        if not _out_of_space(error):
            return None
        folder = self._local_artifact_folder()
        if folder is None:
            return "no space left on the device of the run's artifact store"
        usage = shutil.disk_usage(next(parent for parent in (folder, *folder.parents) if parent.exists()))
        return (f"no space left in its artifact folder {folder} ({usage.free / 2**20:.1f} MB free of "
                f"{usage.total / 2**20:.1f} MB)")

    def _local_artifact_folder(self) -> Path | None:
        """The run's artifact folder where it is on this machine; None for a server's, or a store that
        no longer answers (a full artifact disk leaves a SQLite store readable)."""
        try:
            return _local_folder(self.client.get_run(self.run_id).info.artifact_uri)
        except tracking_errors():
            return None

    def _record(self, event: dict[str, Any], delivered: bool) -> None:
        if self.event_log is not None:
            append_jsonl(self.event_log, [{**event, "delivered": delivered, "time": time.time()}])

    # ---- the interface stages use
    def log_params(self, params: Mapping[str, Any]) -> None:
        # deferred: mlflow is slow to import; a run with tracking off never loads it
        from mlflow.entities import Param

        items = [Param(key, _param_text(value)) for key, value in params.items()]
        delivered = self._send("log_params", lambda: _log_batch(self.client, self.run_id, params=items))
        self._record({"event": "params", "data": {p.key: p.value for p in items}}, delivered)

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, timestamp_ms: int | None = None, held: bool = False
    ) -> None:
        """`timestamp_ms` (default: now) is when the values were logged; `sync` passes the original
        one, so replayed points keep the time they were logged at, not the time of the upload.
        `held`: MLflow already holds these points (`tracking.rewind.points_mlflow_lacks`): recorded as
        delivered, not sent again."""
        # deferred: mlflow is slow to import; a run with tracking off never loads it
        from mlflow.entities import Metric

        finite = _finite_metrics(metrics)
        if not finite:
            return
        stamp = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        items = [Metric(key, value, stamp, step or 0) for key, value in finite.items()]
        delivered = held or self._send("log_metrics", lambda: _log_batch(self.client, self.run_id, metrics=items))
        self._record({"event": "metrics", "step": step, "data": finite, "timestamp_ms": stamp}, delivered)

    def metric_steps(self, key: str) -> set[int]:
        """The steps at which MLflow holds points of `key` (none when offline or unreachable)."""
        steps: set[int] = set()
        read = lambda: steps.update(m.step for m in self.client.get_metric_history(self.run_id, key))  # noqa: E731
        self._send("get_metric_history", read)
        return steps

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        # deferred: mlflow is slow to import; a run with tracking off never loads it
        from mlflow.entities import RunTag

        # An unknown tag (no DVC experiment, no Git) is left out rather than written as "null".
        items = [RunTag(key, _param_text(value)) for key, value in tags.items() if value is not None]
        delivered = self._send("set_tags", lambda: _log_batch(self.client, self.run_id, tags=items))
        self._record({"event": "tags", "data": {t.key: t.value for t in items}}, delivered)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path).resolve()
        if path.is_dir():
            call = lambda: self.client.log_artifacts(self.run_id, str(path), artifact_path)  # noqa: E731
        else:
            call = lambda: self.client.log_artifact(self.run_id, str(path), artifact_path)  # noqa: E731
        delivered = self._send("log_artifact", call)
        self._record({"event": "artifact", "path": str(path), "artifact_path": artifact_path}, delivered)

    def log_dict(self, obj: Any, filename: str) -> None:
        delivered = self._send("log_dict", lambda: self.client.log_dict(self.run_id, obj, filename))
        self._record({"event": "dict", "filename": filename, "data": obj}, delivered)

    def log_table_files(self, jsonl_paths: list[str | Path], artifact_file: str) -> None:
        """Logs the records of JSONL files as one MLflow table, replacing any earlier version of it."""
        paths = [str(Path(path).resolve()) for path in jsonl_paths]
        rows = [row for path in paths for row in read_jsonl(path)]
        delivered = self._send("log_table", lambda: write_table(self.client, self.run_id, rows, artifact_file, False))
        self._record({"event": "table", "paths": paths, "artifact_file": artifact_file}, delivered)

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str, keep_other_steps: bool = False) -> None:
        """Logs `rows` as the MLflow table `artifact_file`; with `keep_other_steps`, the rows an earlier
        version of the table holds for other steps stay (one evaluation table across checkpoints)."""
        delivered = self._send(
            "log_table", lambda: write_table(self.client, self.run_id, rows, artifact_file, keep_other_steps)
        )
        self._record(
            {"event": "table", "rows": rows, "artifact_file": artifact_file, "keep_other_steps": keep_other_steps},
            delivered,
        )

    def log_traces(self, traces: list[tuple[list[str | Path], str, Mapping[str, Any]]]) -> None:
        """Logs each (JSONL files, name, tags) as the run's trace `name`, one span per record, replacing
        any earlier trace of that name: the UI's Traces tab browses them by step and verdict."""
        sent = [([str(Path(path).resolve()) for path in paths], name, {k: _param_text(v) for k, v in tags.items()})
                for paths, name, tags in traces]
        loaded = [(name, [row for path in paths for row in read_jsonl(path)], tags) for paths, name, tags in sent]
        delivered = self._send("log_traces", lambda: write_traces(self.client, self.run_id, loaded))
        self._record(
            {"event": "traces", "traces": [{"paths": p, "name": n, "tags": t} for p, n, t in sent]}, delivered
        )

    def log_dataset(self, name: str, digest: str, source: str, context: str, profile: dict[str, Any]) -> None:
        """Records a dataset the run read (`mlflow.log_input`): the run page and the runs table show it."""
        delivered = self._send(
            "log_input", lambda: _log_input(self.client, self.run_id, name, digest, source, context, profile)
        )
        self._record(
            {"event": "input", "name": name, "digest": digest, "source": source, "context": context,
             "profile": profile},
            delivered,
        )

    def update_description(self, title: str, body: str) -> None:
        """Writes section `title` of the run's description (the note on its Overview page), keeping
        the sections others wrote: training writes its summary, each evaluation its own."""
        current: list[str] = []
        self._send("get_run", lambda: current.append(self.client.get_run(self.run_id).data.tags.get(_NOTE_TAG, "")))
        self.set_tags({_NOTE_TAG: with_section(current[0] if current else "", title, body)})

    def start_time_ms(self) -> int | None:
        """When the run started (None offline): a fixed time to stamp points a rerun logs again."""
        found: list[int] = []
        self._send("get_run", lambda: found.append(self.client.get_run(self.run_id).info.start_time))
        return found[0] if found else None

    def log_checkpoint(self, local_dir: str | Path, artifact_path: str, version: CheckpointVersion) -> bool:
        """Logs `local_dir` (a permanent checkpoint) as the artifact folder `artifact_path`, with
        `version` as `version.json` inside it: what evaluation registers once it has evaluated the
        checkpoint. Registers nothing itself; returns whether MLflow received it."""
        local_dir = Path(local_dir).resolve()

        def send() -> None:
            self.client.log_artifacts(self.run_id, str(local_dir), artifact_path)
            self.client.log_dict(self.run_id, version.to_json(), f"{artifact_path}/{VERSION_FILE}")

        delivered = self._send("log_checkpoint", send)
        self._record(
            {"event": "checkpoint", "path": str(local_dir), "artifact_path": artifact_path,
             "version": version.to_json()},
            delivered,
        )
        return delivered

    def start_system_metrics(self, resumed: bool) -> None:
        """System metrics while the run lasts (`_start_sampler`), when psutil is installed."""

        def start() -> None:
            self._system_metrics = _start_sampler(self.run_id, self.uri, resumed)

        if self.online and importlib.util.find_spec("psutil") is not None:
            self._send("start_system_metrics", start)

    def end(self, status: str = "FINISHED") -> None:
        """Ends the run with `status`; a tracker that does not own its run leaves it as it was."""
        if self._system_metrics is not None:
            monitor, self._system_metrics = self._system_metrics, None
            monitor.finish()  # stopped even offline: its thread must not outlive the run
            self._send("system_metrics", lambda: _log_last_sample(monitor))
        if self.owns_run:
            self._send("end", lambda: self.client.set_terminated(self.run_id, status))


# --------------------------------------------------------------------------- system metrics
#
# MLflow's sampler of CPU, memory, disk and network use (`system/*`) for one run. It samples every
# 10 s while the run lasts, when psutil is installed, and once more as the run ends: MLflow's sampler
# drops the window it is in when stopped, so a run shorter than its interval would otherwise show no
# system metrics at all. It logs live, not at checkpoints: after a resume its points continue from the
# last step it logged, and nothing of it is in the run's event log.


def _start_sampler(run_id: str, uri: str, resumed: bool) -> Any:
    """A started sampler for the run (resumed: its steps continue from the last one logged)."""
    # mlflow loads inside the tracker's calls only: a stage with tracking off never pays its import
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no start/stop lines
    monitor = SystemMetricsMonitor(run_id, resume_logging=resumed, tracking_uri=uri)
    monitor.start()
    return monitor


def _log_last_sample(monitor: Any) -> None:
    """Logs one last sample, taken now, after the stopped sampler's own."""
    monitor.collect_metrics()
    monitor.publish_metrics(monitor.aggregate_metrics())
    monitor.mlflow_logger.flush()
