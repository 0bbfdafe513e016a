"""`hackable-rl sync RUN_DIR`: replay into MLflow whatever a run logged while the store was down."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hackable_rl.errors import UserError
from hackable_rl.jsonl import read_jsonl, write_jsonl
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker, start_tracker

log = logging.getLogger(__name__)


def _replay(tracker: Tracker, event: dict[str, Any]) -> None:
    kind = event["event"]
    if kind == "params":
        tracker.log_params(event["data"])
    elif kind == "metrics":
        tracker.log_metrics(event["data"], step=event.get("step"))
    elif kind == "tags":
        tracker.set_tags(event["data"])
    elif kind == "artifact":
        tracker.log_artifact(event["path"], event.get("artifact_path"))
    elif kind == "dict":
        tracker.log_dict(event["data"], event["filename"])
    elif kind == "table":
        tracker.log_table_file(event["path"], event["artifact_file"])
    elif kind == "register":
        tracker.register_model_version(event["name"], event["path"], event["artifact_path"], event["tags"])
    else:
        raise UserError(f"{tracker.event_log}: unknown event {kind!r}")


def sync_run(config: Any, run_dir: Path) -> dict[str, Any]:
    """Uploads every undelivered event of `run_dir` into its MLflow run (created if it never had one).

    Events are replayed in order; the event log is rewritten with what is now delivered, so a
    second sync sends nothing twice. Returns counts and the run id.
    """
    run_dir = Path(run_dir)
    events_path = run_dir / EVENT_LOG_NAME
    run_json = run_dir / "run.json"
    if not events_path.exists() or not run_json.exists():
        raise UserError(f"{run_dir}: not a run folder (expected {EVENT_LOG_NAME} and run.json inside)")
    info = json.loads(run_json.read_text())
    events = read_jsonl(events_path, torn_tail_ok=True)
    pending = [event for event in events if not event["delivered"]]
    if not pending:
        return {"run_id": info.get("mlflow_run_id"), "replayed": 0, "pending": 0}
    replay_log = run_dir / "tracking-sync.jsonl"
    replay_log.unlink(missing_ok=True)
    tracker = start_tracker(config, info["run_name"], info.get("kind", "train"), info.get("mlflow_run_id"), replay_log)
    if not tracker.online:
        raise UserError(f"MLflow store {tracker.uri} is still unreachable; nothing was uploaded, nothing was lost")
    for event in pending:
        _replay(tracker, event)
    delivered_all = all(event["delivered"] for event in read_jsonl(replay_log))
    tracker.end("FINISHED")
    if delivered_all:
        write_jsonl(events_path, [{**event, "delivered": True} for event in events])
        info["mlflow_run_id"] = tracker.run_id
        info["tracking_pending"] = False
        run_json.write_text(json.dumps(info, indent=2))
    replay_log.unlink(missing_ok=True)
    log.info("synced %d events of %s into MLflow run %s", len(pending), run_dir, tracker.run_id)
    return {"run_id": tracker.run_id, "replayed": len(pending), "pending": 0 if delivered_all else len(pending)}
