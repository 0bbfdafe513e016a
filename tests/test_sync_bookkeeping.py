"""Bookkeeping across processes and outages: run.json lists the checkpoint artifacts of every process
of a resumed run, and `sync` rewrites run.json (tracking URI, checkpoint artifacts), keeps each metric's
time, and registers nothing (evaluation does); event logs from when training registered its
checkpoints (`register` events) sync the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from hackable_rl.core.jsonl import read_jsonl, write_jsonl
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.tracking.sync import sync_run
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker
from hackable_rl.tracking.versions import CheckpointVersion, checkpoint_artifacts
from hackable_rl.training.run import _checkpoint_artifacts

DEAD_URI = "http://127.0.0.1:9"
HOUR_MS = 3_600_000


def _register_event(step: int, version: str | None) -> dict:
    """An event of the event logs written when training registered each checkpoint itself."""
    return {
        "event": "register", "name": "p", "path": f"/x/step-{step}",
        "artifact_path": f"checkpoints/permanent/step-{step}", "tags": {"step": str(step)},
        "description": f"Step {step}", "version": version, "delivered": version is not None, "time": 1.0,
    }


def _checkpoint_event(step: int, delivered: bool) -> dict:
    return {
        "event": "checkpoint", "path": f"/x/step-{step}", "artifact_path": f"checkpoints/permanent/step-{step}",
        "version": {"model": "p", "tags": {"step": str(step)}, "description": f"Step {step}"},
        "delivered": delivered, "time": 1.0,
    }


def test_the_latest_event_of_a_step_says_whether_mlflow_holds_its_checkpoint():
    events = [_register_event(2, "1"), {"event": "metrics"}, _checkpoint_event(4, True), _checkpoint_event(4, False)]
    # step 4 abandoned on resume and saved again while offline: MLflow holds the abandoned one only
    assert checkpoint_artifacts(events) == {"2": "checkpoints/permanent/step-2", "4": None}
    assert checkpoint_artifacts([_checkpoint_event(10, True), _checkpoint_event(9, False)]) == {
        "9": None, "10": "checkpoints/permanent/step-10"}


def test_a_resumed_run_lists_the_checkpoints_of_every_process(tmp_path):
    """Process 1 (from before evaluation registered the checkpoints) registered steps 2 and 4, then
    was killed (its run.json never listed them); process 2 resumed from step 4 and logged step 6,
    offline. Step 8 of process 1 was abandoned on resume."""
    run_dir = tmp_path / "run"
    for step in (2, 4, 6):
        (run_dir / "checkpoints" / "permanent" / f"step-{step}").mkdir(parents=True)
    events = [_register_event(2, "1"), _register_event(4, "2"), _register_event(8, "3"), _checkpoint_event(6, False)]
    write_jsonl(run_dir / EVENT_LOG_NAME, events)

    assert _checkpoint_artifacts(run_dir) == {
        "2": "checkpoints/permanent/step-2", "4": "checkpoints/permanent/step-4", "6": None}


@pytest.fixture
def offline_run(tmp_path, monkeypatch) -> tuple[Path, object, int]:
    """A run folder logged while MLflow was down: params, two metric points an hour old, one
    permanent checkpoint; run.json names the dead store and the checkpoint MLflow has not received."""
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
    version = CheckpointVersion.of("sync-policy-corrupted", {"step": 2, "run_id": None}, "Step 2 of run offline.")
    assert tracker.log_checkpoint(checkpoint, "checkpoints/permanent/step-2", version) is False
    events = read_jsonl(run_dir / EVENT_LOG_NAME)
    logged_at = events[1]["timestamp_ms"] - HOUR_MS  # as if logged an hour before the sync
    write_jsonl(run_dir / EVENT_LOG_NAME, [
        {**e, "timestamp_ms": logged_at + index, "time": (logged_at + index) / 1000} if e["event"] == "metrics" else e
        for index, e in enumerate(events)
    ])
    (run_dir / "run.json").write_text(json.dumps({
        "created_by": "hackable-rl", "run_name": "offline", "kind": "train", "mlflow_run_id": None,
        "tracking_pending": True, "tracking_uri": DEAD_URI, "checkpoint_artifacts": {"2": None},
    }))
    return run_dir, config, logged_at


def test_sync_rewrites_run_json_and_keeps_each_metrics_time(offline_run):
    run_dir, config, logged_at = offline_run

    outcome = sync_run(config, run_dir)

    info = json.loads((run_dir / "run.json").read_text())
    assert info["tracking_uri"] == tracking_uri(config.storage.cache_dir) != DEAD_URI
    assert info["mlflow_run_id"] == outcome["run_id"] and info["tracking_pending"] is False
    client = MlflowClient(info["tracking_uri"])
    assert info["checkpoint_artifacts"] == {"2": "checkpoints/permanent/step-2"}
    assert _version_json(client, outcome["run_id"], run_dir.parent) == {
        "model": "sync-policy-corrupted", "tags": {"step": "2"}, "description": "Step 2 of run offline."}
    assert client.search_model_versions(f"run_id = '{outcome['run_id']}'") == []  # evaluation registers it
    history = sorted(client.get_metric_history(outcome["run_id"], "judge/correctness"), key=lambda p: p.step)
    assert [(p.step, p.value) for p in history] == [(1, 0.25), (2, 0.5)]
    assert [p.timestamp for p in history] == [logged_at + 1, logged_at + 2]  # not the time of the sync
    [checkpoint] = [e for e in read_jsonl(run_dir / EVENT_LOG_NAME) if e["event"] == "checkpoint"]
    assert checkpoint["delivered"]


def _version_json(client: MlflowClient, run_id: str, folder: Path) -> dict:
    files = {a.path for a in client.list_artifacts(run_id, "checkpoints/permanent/step-2")}
    assert {"checkpoints/permanent/step-2/checkpoint.json", "checkpoints/permanent/step-2/version.json"} <= files
    path = client.download_artifacts(run_id, "checkpoints/permanent/step-2/version.json", str(folder))
    return json.loads(Path(path).read_text())


def test_an_event_log_from_when_training_registered_syncs_the_checkpoint_without_registering(offline_run):
    """An offline run folder of that time: an undelivered `register` event and run.json's null version.
    Sync logs the checkpoint with the version it named, and run.json records the artifact instead."""
    run_dir, config, _ = offline_run
    old = {"event": "register", "name": "sync-policy-corrupted", "path": str(run_dir / "checkpoints/permanent/step-2"),
           "artifact_path": "checkpoints/permanent/step-2", "tags": {"step": "2"}, "description": "Step 2 (old).",
           "version": None, "delivered": False, "time": 1.0}
    events = [old if e["event"] == "checkpoint" else e for e in read_jsonl(run_dir / EVENT_LOG_NAME)]
    write_jsonl(run_dir / EVENT_LOG_NAME, events)
    info = json.loads((run_dir / "run.json").read_text())
    del info["checkpoint_artifacts"]
    (run_dir / "run.json").write_text(json.dumps({**info, "registered_versions": {"2": None}}))

    outcome = sync_run(config, run_dir)

    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    assert _version_json(client, outcome["run_id"], run_dir.parent)["description"] == "Step 2 (old)."
    assert client.search_model_versions(f"run_id = '{outcome['run_id']}'") == []
    info = json.loads((run_dir / "run.json").read_text())
    assert info["checkpoint_artifacts"] == {"2": "checkpoints/permanent/step-2"} and "registered_versions" not in info
    assert all(e["delivered"] for e in read_jsonl(run_dir / EVENT_LOG_NAME))


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
    from hackable_rl.tracking.client_calls import _log_input

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
