"""`hackable-rl sync RUN_DIR`: replay into MLflow whatever a run logged while the store was down."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hackable_rl.errors import UserError
from hackable_rl.jsonl import read_jsonl, write_jsonl
from hackable_rl.tracking.tracker import (
    EVENT_LOG_NAME,
    Tracker,
    merge_versions,
    registered_versions,
    start_tracker,
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
    elif kind == "input":
        tracker.log_dataset(event["name"], event["digest"], event["source"], event["context"], event["profile"])
    elif kind == "register":
        tracker.register_model_version(
            event["name"], event["path"], event["artifact_path"], event["tags"], event.get("description", "")
        )
    else:
        raise UserError(f"{tracker.event_log}: unknown event {kind!r}")


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


def _with_versions(events: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The event log once delivered: every event marked so, and each replayed register event given
    the version number its replay received (in order, by registered name and artifact path)."""
    versions: dict[tuple[str, str], list[str | None]] = {}
    for event in replayed:
        if event["event"] == "register":
            versions.setdefault((event["name"], event["artifact_path"]), []).append(event.get("version"))
    delivered = []
    for event in events:
        if event["event"] == "register" and not event["delivered"]:
            received = versions.get((event["name"], event["artifact_path"])) or [None]
            event = {**event, "version": received.pop(0)}
        delivered.append({**event, "delivered": True})
    return delivered


def _synced_info(info: dict[str, Any], tracker: Tracker, events: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json after a sync: the run id and URI of the store it now lives in, and the version number
    of each registered checkpoint (those listed when the run finished; all of them for an unfinished run)."""
    found = registered_versions(events)
    listed = info.get("registered_versions")
    versions = merge_versions(listed, {k: v for k, v in found.items() if k in listed}) if listed else found
    return {
        **info, "mlflow_run_id": tracker.run_id, "tracking_uri": tracker.uri, "tracking_pending": False,
        **({"registered_versions": versions} if versions else {}),
    }


def _recorded_hint(info: dict[str, Any], uri: str) -> str:
    """Sync uploads to this process's store (MLFLOW_TRACKING_URI, else the project's SQLite store). A
    run started against another store keeps its run id there, so say where."""
    recorded = info.get("tracking_uri")
    if not recorded or recorded == uri or not info.get("mlflow_run_id"):
        return ""
    return f" or has no run {info['mlflow_run_id']}: the run was started on {recorded} (set MLFLOW_TRACKING_URI={recorded})"


def sync_run(config: Any, run_dir: Path) -> dict[str, Any]:
    """Uploads every undelivered event of `run_dir` into its MLflow run (created if it never had one).

    Events are replayed in order, metrics with the time they were first logged; the event log is
    rewritten with what is now delivered, so a second sync sends nothing twice; run.json gets the
    run id, tracking URI and registry version numbers. Returns counts and the run id.
    """
    run_dir = Path(run_dir)
    events_path = run_dir / EVENT_LOG_NAME
    run_json = run_dir / "run.json"
    if not events_path.exists() or not run_json.exists():
        raise UserError(f"{run_dir}: not a run folder (expected {EVENT_LOG_NAME} and run.json inside)")
    info = _read_info(run_json)
    events = read_jsonl(events_path, torn_tail_ok=True)
    pending = [event for event in events if not event["delivered"]]
    if not pending:
        return {"run_id": info.get("mlflow_run_id"), "replayed": 0, "pending": 0}
    replay_log = run_dir / "tracking-sync.jsonl"
    replay_log.unlink(missing_ok=True)
    name = info.get("run_name") or run_dir.name
    tracker = start_tracker(config, name, info.get("kind", "train"), info.get("mlflow_run_id"), replay_log)
    if not tracker.online:
        raise UserError(f"MLflow store {tracker.uri} is still unreachable{_recorded_hint(info, tracker.uri)}; "
                        "nothing was uploaded, nothing was lost")
    for event in pending:
        _replay(tracker, event)
    delivered_all = all(event["delivered"] for event in read_jsonl(replay_log))
    tracker.end("FINISHED")
    if delivered_all:
        delivered = _with_versions(events, read_jsonl(replay_log))
        write_jsonl(events_path, delivered)
        run_json.write_text(json.dumps(_synced_info(info, tracker, delivered), indent=2))
    replay_log.unlink(missing_ok=True)
    log.info("synced %d events of %s into MLflow run %s", len(pending), run_dir, tracker.run_id)
    return {"run_id": tracker.run_id, "replayed": len(pending), "pending": 0 if delivered_all else len(pending)}
