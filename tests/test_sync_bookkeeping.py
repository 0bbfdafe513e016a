"""Bookkeeping across processes and outages: run.json lists every registered version of a resumed
run, and `sync` rewrites run.json (tracking URI, version numbers) and keeps each metric's time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.scoring.extensions import load_resolved
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.tracking.sync import sync_run
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker
from hackable_rl.tracking.versions import merge_versions, registered_versions
from hackable_rl.training.run import _registered_versions

DEAD_URI = "http://127.0.0.1:9"
HOUR_MS = 3_600_000


def _register_event(step: int, version: str | None) -> dict:
    return {
        "event": "register", "name": "p", "path": f"/x/step-{step}",
        "artifact_path": f"checkpoints/permanent/step-{step}", "tags": {"step": str(step)}, "version": version, "delivered": version is not None, "time": 1.0,
    }


def test_versions_merge_as_a_union_where_null_never_hides_a_number():
    assert merge_versions({"2": "1", "10": None}, {"10": "4", "2": None}, {"3": "5"}) == {"2": "1", "3": "5", "10": "4"}
    events = [_register_event(2, "1"), {"event": "metrics"}, _register_event(4, None), _register_event(4, "2")]
    assert registered_versions(events) == {"2": "1", "4": "2"}


def test_a_resumed_run_lists_the_versions_of_every_process(tmp_path):
    """Process 1 registered steps 2 and 4, then was killed (its run.json never listed them); process 2
    resumed from step 4 and registered step 6. Step 8 of process 1 was abandoned on resume."""
    run_dir = tmp_path / "run"
    for step in (2, 4, 6):
        (run_dir / "checkpoints" / "permanent" / f"step-{step}").mkdir(parents=True)
    write_jsonl(run_dir / EVENT_LOG_NAME, [_register_event(2, "1"), _register_event(4, "2"), _register_event(8, "3")])
    info = {"status": "running"}  # what a killed process leaves

    assert _registered_versions(run_dir, info, {6: "4"}) == {"2": "1", "4": "2", "6": "4"}


@pytest.fixture
def offline_run(tmp_path, monkeypatch) -> tuple[Path, object, int]:
    """A run folder logged while MLflow was down: params, two metric points an hour old, one
    registered checkpoint; run.json names the dead store and a null version."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"storage": {"cache_dir": str(tmp_path / "cache")},
                                      "tracking": {"experiment_name": "sync", "registered_model_name": "sync-policy"}}))
    config = load_resolved(params)
    run_dir = tmp_path / "run"
    checkpoint = run_dir / "checkpoints" / "permanent" / "step-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "checkpoint.json").write_text("{}")
    tracker = Tracker(None, None, run_dir / EVENT_LOG_NAME, DEAD_URI)
    tracker.log_params({"seed": 0})
    tracker.log_metrics({"judge/correctness": 0.25}, step=1)
    tracker.log_metrics({"judge/correctness": 0.5}, step=2)
    tracker.register_model_version("sync-policy", checkpoint, "checkpoints/permanent/step-2", {"step": 2})
    events = read_jsonl(run_dir / EVENT_LOG_NAME)
    logged_at = events[1]["timestamp_ms"] - HOUR_MS  # as if logged an hour before the sync
    write_jsonl(run_dir / EVENT_LOG_NAME, [
        {**e, "timestamp_ms": logged_at + index, "time": (logged_at + index) / 1000} if e["event"] == "metrics" else e
        for index, e in enumerate(events)
    ])
    (run_dir / "run.json").write_text(json.dumps({
        "created_by": "hackable-rl", "run_name": "offline", "kind": "train", "mlflow_run_id": None,
        "tracking_pending": True, "tracking_uri": DEAD_URI, "registered_versions": {"2": None},
    }))
    return run_dir, config, logged_at


def test_sync_rewrites_run_json_and_keeps_each_metrics_time(offline_run):
    run_dir, config, logged_at = offline_run

    outcome = sync_run(config, run_dir)

    info = json.loads((run_dir / "run.json").read_text())
    assert info["tracking_uri"] == tracking_uri(config.storage.cache_dir) != DEAD_URI
    assert info["mlflow_run_id"] == outcome["run_id"] and info["tracking_pending"] is False
    client = MlflowClient(info["tracking_uri"])
    [version] = client.search_model_versions("name='sync-policy'")
    assert info["registered_versions"] == {"2": str(version.version)}
    history = sorted(client.get_metric_history(outcome["run_id"], "judge/correctness"), key=lambda p: p.step)
    assert [(p.step, p.value) for p in history] == [(1, 0.25), (2, 0.5)]
    assert [p.timestamp for p in history] == [logged_at + 1, logged_at + 2]  # not the time of the sync
    register = [e for e in read_jsonl(run_dir / EVENT_LOG_NAME) if e["event"] == "register"]
    assert register[0]["version"] == str(version.version) and register[0]["delivered"]


def test_an_event_log_from_before_timestamps_were_recorded_replays_its_append_time(offline_run):
    run_dir, config, logged_at = offline_run
    events = [{k: v for k, v in e.items() if k != "timestamp_ms"} for e in read_jsonl(run_dir / EVENT_LOG_NAME)]
    write_jsonl(run_dir / EVENT_LOG_NAME, events)

    outcome = sync_run(config, run_dir)

    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    history = client.get_metric_history(outcome["run_id"], "judge/correctness")
    assert sorted(p.timestamp for p in history) == [logged_at + 1, logged_at + 2]


def test_an_offline_event_records_the_time_it_was_logged(tmp_path):
    tracker = Tracker(None, None, tmp_path / EVENT_LOG_NAME, DEAD_URI)
    tracker.log_metrics({"x": 1.0}, step=3, timestamp_ms=1_234)
    [event] = read_jsonl(tmp_path / EVENT_LOG_NAME)
    assert (event["timestamp_ms"], event["step"], event["delivered"]) == (1_234, 3, False)


def test_sync_replays_block_tables_datasets_and_the_description(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"storage": {"cache_dir": str(tmp_path / "cache")},
                                      "tracking": {"experiment_name": "sync"}}))
    config = load_resolved(params)
    run_dir = tmp_path / "run"
    records = run_dir / "generations" / "step-00001.jsonl"
    records.parent.mkdir(parents=True)
    write_jsonl(records, [{"step": 1, "completion": "x"}])
    tracker = Tracker(None, None, run_dir / EVENT_LOG_NAME, DEAD_URI)
    tracker.log_table_files([records], "generations/steps-00001-00050.json")
    tracker.log_dataset("arith/train", "abc123", records.as_uri(), "training", {"rows": 1})
    tracker.update_description("Training", "1 step")
    (run_dir / "run.json").write_text(json.dumps({"created_by": "hackable-rl", "run_name": "offline", "kind": "train"}))

    outcome = sync_run(config, run_dir)

    run = MlflowClient(tracking_uri(config.storage.cache_dir)).get_run(outcome["run_id"])
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [
        {"path": "generations/steps-00001-00050.json", "type": "table"}
    ]
    assert [(d.dataset.name, d.dataset.digest) for d in run.inputs.dataset_inputs] == [("arith/train", "abc123")]
    assert run.data.tags["mlflow.note.content"] == "### Training\n1 step\n"


def test_two_runs_logging_one_new_dataset_at_once_stay_online(tmp_path):
    """`hackable-rl seeds` starts two runs side by side: both insert the same new dataset row, the
    second insert fails on the unique key (seen with SQLite), and that run must not go offline."""
    from hackable_rl.tracking.tracker import _log_input

    class RacingClient:
        calls = 0

        def log_inputs(self, run_id, inputs):
            RacingClient.calls += 1
            if RacingClient.calls == 1:
                raise RuntimeError("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id")

    _log_input(RacingClient(), "run", "arith/train", "abc", "file:///x", "training", {"rows": 1})
    assert RacingClient.calls == 2

    class BrokenClient:
        def log_inputs(self, run_id, inputs):
            raise RuntimeError("disk I/O error")

    with pytest.raises(RuntimeError, match="disk I/O error"):
        _log_input(BrokenClient(), "run", "arith/train", "abc", "file:///x", "training", {"rows": 1})


def test_sync_says_where_a_run_started_elsewhere_lives() -> None:
    from hackable_rl.tracking.sync import _recorded_hint

    info = {"mlflow_run_id": "abc", "tracking_uri": "http://127.0.0.1:5000"}
    assert _recorded_hint(info, "sqlite:///cache/mlflow/mlflow.db") == (
        " or has no run abc: the run was started on http://127.0.0.1:5000 (set MLFLOW_TRACKING_URI=http://127.0.0.1:5000)")
    assert _recorded_hint(info, "http://127.0.0.1:5000") == ""  # the same store: it is just down
    assert _recorded_hint({"tracking_uri": "http://x"}, "sqlite:///y") == ""  # no run there yet: created on sync
