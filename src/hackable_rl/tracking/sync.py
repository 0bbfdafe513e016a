"""`hackable-rl sync RUN_DIR`: replay into MLflow whatever a run logged while the store was down."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_jsonl, write_json, write_jsonl
from hackable_rl.core.run_lock import run_lock
from hackable_rl.tracking.opening import start_tracker
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker
from hackable_rl.tracking.versions import (
    CHECKPOINT_EVENTS,
    CheckpointVersion,
    checkpoint_artifacts,
    without_registered_versions,
)

log = logging.getLogger(__name__)


def _replay(tracker: Tracker, event: dict[str, Any]) -> None:
    kind = event["event"]
    if kind == "params":
        tracker.log_params(event["data"])
    elif kind == "metrics":
        tracker.log_metrics(event["data"], step=event.get("step"), timestamp_ms=_logged_at_ms(event))
    elif kind == "tags":
        tracker.set_tags(event["data"])
    elif kind == "artifact":
        tracker.log_artifact(event["path"], event.get("artifact_path"))
    elif kind == "dict":
        tracker.log_dict(event["data"], event["filename"])
    elif kind == "table":
        _replay_table(tracker, event)
    elif kind == "traces":
        tracker.log_traces([(trace["paths"], trace["name"], trace["tags"]) for trace in event["traces"]])
    elif kind == "input":
        tracker.log_dataset(event["name"], event["digest"], event["source"], event["context"], event["profile"])
    elif kind in CHECKPOINT_EVENTS:
        tracker.log_checkpoint(event["path"], event["artifact_path"], _checkpoint_version(event))
    else:
        raise UserError(f"{EVENT_LOG_NAME}: unknown event {kind!r}")


def _replay_table(tracker: Tracker, event: dict[str, Any]) -> None:
    """A table of rows, or of JSONL files (one `path` in event logs written before tables held blocks)."""
    if "rows" in event:
        tracker.log_table(event["rows"], event["artifact_file"], event.get("keep_other_steps", False))
    else:
        tracker.log_table_files(event.get("paths") or [event["path"]], event["artifact_file"])


def _read_info(run_json: Path) -> dict[str, Any]:
    try:
        info = json.loads(run_json.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError) as error:
        raise UserError(f"{run_json}: not a readable run.json ({error.__class__.__name__})") from None
    if not isinstance(info, dict):
        raise UserError(f"{run_json}: expected a JSON object, got {type(info).__name__}")
    return info


def _logged_at_ms(event: dict[str, Any]) -> int:
    """When the point was first logged: the stamp the tracker recorded, or (event logs written before
    it recorded one) the time the event was appended, which is the same moment."""
    if event.get("timestamp_ms") is not None:
        return int(event["timestamp_ms"])
    return int(event["time"] * 1000)


def _checkpoint_version(event: dict[str, Any]) -> CheckpointVersion:
    """The version a checkpoint event carries; a `register` event (event logs from when training
    registered each checkpoint itself) carried the same model, tags and description in its own fields."""
    where = f"{EVENT_LOG_NAME}: {event['event']} event of {event['artifact_path']}"
    if event["event"] == "checkpoint":
        return CheckpointVersion.from_json(event.get("version"), where)
    return CheckpointVersion.from_json(
        {"model": event.get("name"), "tags": event.get("tags"), "description": event.get("description", "")}, where
    )


def _marked_delivered(events: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event log once `sent` (pending events, replayed while the store answered) are delivered."""
    sent_ids = {id(event) for event in sent}
    return [{**event, "delivered": True} if id(event) in sent_ids else event for event in events]


def _synced_info(info: dict[str, Any], tracker: Tracker, events: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json after a sync: the run id and URI of the store it now lives in, and the artifact folder
    of each permanent checkpoint (those listed when the run finished; all of them for an unfinished run)."""
    found = checkpoint_artifacts(events)
    listed = info.get("checkpoint_artifacts") or info.get("registered_versions")  # the latter: older run.json
    artifacts = {step: path for step, path in found.items() if step in listed} if listed else found
    return {
        **without_registered_versions(info), "mlflow_run_id": tracker.run_id, "tracking_uri": tracker.shown_uri,
        "tracking_pending": False, **({"checkpoint_artifacts": artifacts} if artifacts else {}),
    }


def _recorded_hint(info: dict[str, Any], uri: str) -> str:
    """Sync uploads to this process's store (MLFLOW_TRACKING_URI, else the project's SQLite store). A
    run started against another store keeps its run id there, so say where (credentials masked)."""
    recorded = info.get("tracking_uri")
    if not recorded or recorded == uri or not info.get("mlflow_run_id"):
        return ""
    return f" or has no run {info['mlflow_run_id']}: the run was started on {recorded} (set MLFLOW_TRACKING_URI={recorded})"


def _read_events(path: Path) -> list[dict[str, Any]]:
    """The event log; a row without its `event` or `delivered` field is a UserError naming its line."""
    events = []
    for number, event in iter_jsonl(path, torn_tail_ok=True):
        missing = [key for key in ("event", "delivered") if key not in event]
        if missing:
            raise UserError(f"{path}:{number}: event row without {missing[0]!r}; not an event log of hackable-rl")
        events.append(event)
    return events


def _replay_while_online(tracker: Tracker, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replays events in order until the store fails; returns those it took."""
    sent = []
    for event in pending:
        _replay(tracker, event)
        if not tracker.online:
            break
        sent.append(event)
    return sent


def sync_run(config: Any, run_dir: Path) -> dict[str, Any]:
    """Uploads every undelivered event of `run_dir` into its MLflow run (created if it never had one).

    Events are replayed in order, metrics with the time they were first logged; the event log is
    rewritten with what is now delivered, so a second sync sends nothing twice; run.json gets the
    run id (at once, so a sync that fails half-way and is retried continues the same MLflow run),
    tracking URI and the artifact folders of its permanent checkpoints (registered only once evaluated:
    `hackable-rl eval --run-id`). The run folder's writer lock is held throughout.
    A store that fails during the replay is a UserError (exit 2) saying what remains.
    """
    run_dir = Path(run_dir)
    if not (run_dir / EVENT_LOG_NAME).exists() or not (run_dir / "run.json").exists():
        raise UserError(f"{run_dir}: not a run folder (expected {EVENT_LOG_NAME} and run.json inside)")
    with run_lock(run_dir):
        return _sync_locked(config, run_dir)


def _sync_locked(config: Any, run_dir: Path) -> dict[str, Any]:
    events_path, run_json = run_dir / EVENT_LOG_NAME, run_dir / "run.json"
    info = _read_info(run_json)
    events = _read_events(events_path)
    pending = [event for event in events if not event["delivered"]]
    if not pending:
        return {"run_id": info.get("mlflow_run_id"), "replayed": 0, "pending": 0}
    replay_log = run_dir / "tracking-sync.jsonl"  # the replaying tracker's own log, a scratch file
    replay_log.unlink(missing_ok=True)
    name = info.get("run_name") or run_dir.name
    try:
        tracker = start_tracker(config, name, info.get("kind", "train"), info.get("mlflow_run_id"), replay_log)
    except UserError as error:  # this store refuses the run id: run.json may name the store that has it
        recorded = info.get("tracking_uri")
        where = f" (run.json records the store {recorded}: set MLFLOW_TRACKING_URI={recorded})" if recorded else ""
        raise UserError(f"{error.problems[0]}{where}") from None
    if not tracker.online:
        raise UserError(f"MLflow store {tracker.shown_uri} is still unreachable"
                        f"{_recorded_hint(info, tracker.shown_uri)}; nothing was uploaded, nothing was lost")
    tracker.warn_offline = False  # a failure is this command's error line, not a tracker's warning besides it
    if tracker.run_id != info.get("mlflow_run_id"):  # a new MLflow run: a retry must continue it
        info = {**info, "mlflow_run_id": tracker.run_id, "tracking_uri": tracker.shown_uri}
        write_json(run_json, info)
    sent = _replay_while_online(tracker, pending)
    delivered = _marked_delivered(events, sent)
    write_jsonl(events_path, delivered)
    replay_log.unlink(missing_ok=True)
    if len(sent) < len(pending):
        raise UserError(
            f"{run_dir}: MLflow at {tracker.shown_uri} failed after {len(sent)} of {len(pending)} events "
            f"({tracker.failure}); {len(pending) - len(sent)} remain in {EVENT_LOG_NAME}; run `hackable-rl sync` "
            f"again: it continues MLflow run {tracker.run_id}"
        )
    tracker.end("FINISHED")
    write_json(run_json, _synced_info(info, tracker, delivered))
    log.info("synced %d events of %s into MLflow run %s", len(pending), run_dir, tracker.run_id)
    return {"run_id": tracker.run_id, "replayed": len(pending), "pending": 0}
