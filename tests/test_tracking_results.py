"""Results where researchers look, in MLflow: generation tables in blocks of steps, run descriptions,
the experiment's kind, `hackable-rl ui`, and provenance that ignores what DVC itself writes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.jsonl import append_jsonl, read_jsonl
from hackable_rl.core.storage import Storage
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.client_calls import with_section
from hackable_rl.tracking.opening import start_tracker
from hackable_rl.tracking.provenance import dataset_input, dvc_lock_hash, git_state
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.tracking.tables import block_bounds, generations_table
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker
from hackable_rl.training.run_dir import read_run_info


def _store(tmp_path: Path) -> tuple[MlflowClient, str, str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("results", artifact_location=(tmp_path / "artifacts").as_uri())
    return client, experiment, client.create_run(experiment).info.run_id


def _listed_tables(client: MlflowClient, run_id: str) -> list[str]:
    return [entry["path"] for entry in json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])]


def _table_rows(client: MlflowClient, run_id: str, artifact: str, folder: Path) -> list[dict]:
    table = json.loads(Path(client.download_artifacts(run_id, artifact, str(folder))).read_text())
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def test_blocks_of_fifty_steps_name_their_tables():
    assert block_bounds(1) == (1, 50) and block_bounds(50) == (1, 50) and block_bounds(51) == (51, 100)
    assert generations_table(130) == "generations/steps-00101-00150.json"


def test_every_steps_records_are_rows_of_a_block_table_and_a_resume_sends_none_twice(tmp_path):
    from hackable_rl.training.callback import RunCallback, RunContext
    from hackable_rl.training.recorder import GenerationRecorder, step_file

    client, _, run_id = _store(tmp_path)
    run_dir = tmp_path / "run"
    recorder = GenerationRecorder(run_dir)
    for step in range(1, 121):
        append_jsonl(step_file(recorder.generations_dir, step), [{"step": step, "sample": i} for i in range(2)])
        recorder.append_metrics(step, {"judge/correctness": 0.5})
    context = RunContext(
        run_dir=run_dir, recorder=recorder, tracker=Tracker(client, run_id, run_dir / EVENT_LOG_NAME, "sqlite"),
        tokenizer=None, permanent_steps=set(), config_hash="h", base_model="tiny", registered_model_name="m",
        version_tags={}, log_tables=True, describe_version=str,
    )
    callback = RunCallback(context)
    callback._pending_tables = list(range(1, 101))  # checkpoint 100 ...
    callback.flush_to_tracker()
    callback._pending_tables = list(range(101, 121))  # ... and the end
    callback.flush_to_tracker()

    tables = _listed_tables(client, run_id)
    assert tables == [generations_table(1), generations_table(51), generations_table(101)]
    steps = [row["step"] for table in tables for row in _table_rows(client, run_id, table, tmp_path / "dl")]
    assert steps == [step for step in range(1, 121) for _ in range(2)]

    resumed = RunCallback(context)  # resumed from checkpoint 120 after a kill: every table was sent
    resumed.catch_up(read_jsonl(run_dir / EVENT_LOG_NAME), 120)
    assert resumed._pending_tables == []


def test_a_resume_after_a_kill_between_delivery_and_event_sends_no_point_twice(tmp_path):
    """A kill after MLflow received step 1's points and before their event reached the event log; the
    run resumes from checkpoint 2. Its first send leaves out step 1 (recorded as delivered), sends
    step 2, and sends step 3, trained again after the resume, even where MLflow holds an older point
    of it (a tracking server keeps the points of abandoned steps: `tracking.rewind`)."""
    from hackable_rl.training.callback import RunCallback, RunContext
    from hackable_rl.training.recorder import GenerationRecorder

    client, _, run_id = _store(tmp_path)
    run_dir = tmp_path / "run"
    recorder = GenerationRecorder(run_dir)
    for step in (1, 2):
        recorder.append_metrics(step, {"judge/correctness": step / 4, "reward/mean": step / 2})
    client.log_metric(run_id, "judge/correctness", 0.25, step=1)  # delivered; the kill took the event
    client.log_metric(run_id, "reward/mean", 0.5, step=1)
    client.log_metric(run_id, "judge/correctness", 0.0, step=3)  # the abandoned step 3's point
    tracker = Tracker(client, run_id, run_dir / EVENT_LOG_NAME, "sqlite")
    context = RunContext(
        run_dir=run_dir, recorder=recorder, tracker=tracker, tokenizer=None, permanent_steps=set(),
        config_hash="h", base_model="tiny", registered_model_name="m", version_tags={}, log_tables=False,
        describe_version=str,
    )
    resumed = RunCallback(context)
    resumed.catch_up([], 2)
    assert [step for step, _ in resumed._pending_metrics] == [1, 2]
    trained_again = {"judge/correctness": 0.75, "reward/mean": 1.5}
    recorder.append_metrics(3, trained_again)
    resumed._pending_metrics.append((3, trained_again))
    resumed.flush_to_tracker()

    judged = [(m.step, m.value) for m in client.get_metric_history(run_id, "judge/correctness")]
    assert sorted(judged) == [(1, 0.25), (2, 0.5), (3, 0.0), (3, 0.75)]
    assert sorted(m.step for m in client.get_metric_history(run_id, "reward/mean")) == [1, 2, 3]
    events = read_jsonl(run_dir / EVENT_LOG_NAME)
    assert [(e["step"], e["delivered"]) for e in events if e["event"] == "metrics"] == [(1, True), (2, True), (3, True)]

    resumed.catch_up(events, 3)  # a second resume: every point is in the event log now
    assert resumed._pending_metrics == []


def test_a_resume_sends_only_the_checkpoints_no_event_carried_old_register_events_included(tmp_path):
    """On resume, a permanent checkpoint goes to MLflow unless an event already carried it: a
    `checkpoint` event, or the `register` event of event logs from when training registered its
    checkpoints itself (delivered, or waiting for `hackable-rl sync`). What goes is the folder with
    its version-to-be, never a registry version."""
    from hackable_rl.training.callback import RunCallback, RunContext
    from hackable_rl.training.recorder import GenerationRecorder

    run_dir = tmp_path / "run"
    for step in (2, 4, 6):
        (run_dir / "checkpoints" / "permanent" / f"step-{step}").mkdir(parents=True)
    old = {"event": "register", "name": "m", "path": "/old/step-2", "artifact_path": "checkpoints/permanent/step-2",
           "tags": {"step": "2"}, "description": "Step 2", "version": "1", "delivered": True}
    pending = {"event": "checkpoint", "path": "/x/step-4", "artifact_path": "checkpoints/permanent/step-4",
               "version": {"model": "m", "tags": {"step": "4"}, "description": "Step 4"}, "delivered": False}
    offline = Tracker(None, None, run_dir / EVENT_LOG_NAME, None)
    context = RunContext(
        run_dir=run_dir, recorder=GenerationRecorder(run_dir), tracker=offline, tokenizer=None,
        permanent_steps={2, 4, 6}, config_hash="h", base_model="tiny", registered_model_name="m-corrupted",
        version_tags={"run_id": None, "seed": 0}, log_tables=False, describe_version=lambda step: f"Step {step}",
    )
    resumed = RunCallback(context)
    resumed.catch_up([old, pending], 6)
    assert resumed._pending_permanent == [(6, run_dir / "checkpoints" / "permanent" / "step-6")]

    resumed.flush_to_tracker()
    [sent] = read_jsonl(run_dir / EVENT_LOG_NAME)
    assert (sent["event"], sent["artifact_path"]) == ("checkpoint", "checkpoints/permanent/step-6")
    assert not sent["delivered"]  # offline: `hackable-rl sync` sends it later
    assert sent["version"] == {"model": "m-corrupted", "tags": {"seed": "0", "step": "6"}, "description": "Step 6"}


def test_description_sections_are_replaced_by_title_and_keep_the_rest():
    text = with_section("", "Training", "200 steps")
    text = with_section(text, "Evaluation, step-200", "pass@1 0.8")
    text = with_section(text, "Training", "201 steps")
    assert text == "### Evaluation, step-200\npass@1 0.8\n\n### Training\n201 steps\n"
    assert with_section("written by hand", "Training", "x") == "written by hand\n\n### Training\nx\n"


def test_the_experiment_is_marked_as_model_training_unless_the_user_chose(tmp_path, monkeypatch):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"storage": {"cache_dir": str(tmp_path / "cache")},
                                      "tracking": {"experiment_name": "kind"}}))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = load_resolved(params)
    start_tracker(config, "a", "train").end()
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    experiment = client.get_experiment_by_name("kind")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    client.set_experiment_tag(experiment.experiment_id, "mlflow.experimentKind", "genai_development")
    start_tracker(config, "b", "train").end()
    assert client.get_experiment_by_name("kind").tags["mlflow.experimentKind"] == "genai_development"


def test_ui_prints_the_runs_table_view_and_the_traces_and_refuses_a_taken_port_in_one_line(tmp_path, monkeypatch):
    from hackable_rl.tracking.server import ui_urls
    from hackable_rl.tracking.views import RUNS_VIEW_KEY

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"storage": {"cache_dir": str(tmp_path / "cache")},
                                      "tracking": {"experiment_name": "ui"}}))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = load_resolved(params)
    assert ui_urls(config, 5001) == {"runs": "http://127.0.0.1:5001/"}  # no experiment yet: the home page
    start_tracker(config, "a", "train").end()
    experiment = MlflowClient(tracking_uri(config.storage.cache_dir)).get_experiment_by_name("ui")
    urls = ui_urls(config, 5001)
    page = f"http://127.0.0.1:5001/#/experiments/{experiment.experiment_id}"
    assert urls["runs"] == f"{page}/runs?viewStateShareKey={RUNS_VIEW_KEY}&workflowType=machine_learning"
    assert urls["generations (traces)"] == f"{page}/traces"
    view = json.loads(experiment.tags[f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"])
    assert view["selectedColumns"][:2] == ["metrics.`Headline/eval_pass_at_1`", "metrics.`Headline/eval_hacking_gap`"]

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["ui", "--config", str(params), "--port", str(port)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and f"127.0.0.1:{port} is already in use" in result.output


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def test_git_dirty_ignores_what_dvc_writes_and_the_dvc_lock_is_hashed(tmp_path, monkeypatch):
    stages = {"stages": {
        "train": {"cmd": "x", "outs": ["reports"], "metrics": [{"metrics/eval.json": {"cache": False}}]},
        "cell": {"matrix": {"rate": [0, 1]}, "cmd": "y", "outs": ["results/r${item.rate}/cell.json"]},
    }}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(stages))
    for name in ("dvc.lock", "reports/plot.txt", "metrics/eval.json", "results/r0/cell.json", "src/code.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("first\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.chdir(tmp_path)
    for name in ("dvc.lock", "reports/plot.txt", "metrics/eval.json", "results/r0/cell.json"):
        (tmp_path / name).write_text("rewritten by dvc repro\n")

    assert git_state()["git_dirty"] is False
    assert dvc_lock_hash() == hashlib.sha256(b"rewritten by dvc repro\n").hexdigest()
    (tmp_path / "src/code.py").write_text("changed\n")
    assert git_state()["git_dirty"] is True


def test_a_dataset_input_carries_the_manifest_hash_as_digest(tmp_path):
    manifest = {"name": "arith", "outputs": {"train": {"file": "train.jsonl", "rows": 64, "sha256": "ab"}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    record = dataset_input(tmp_path, "train")
    digest = hashlib.sha256((tmp_path / "manifest.json").read_bytes()).hexdigest()
    assert record["name"] == "arith/train" and record["digest"] == digest[:32]
    assert record["profile"] == {"rows": 64, "sha256": "ab", "manifest_sha256": digest}
    assert dataset_input(tmp_path / "absent", "train") is None


@pytest.mark.slow
def test_a_201_step_run_prints_a_screenful_and_has_every_steps_records_in_mlflow_tables(project, monkeypatch):
    """`hackable-rl train` for 201 steps in a real process whose output is a pipe, as under DVC (about
    a minute on 2 quiet cores): at most 30 console lines (#14: "a 200-step training prints no more
    than about 30 lines"), and five block tables holding every record of every step."""
    overrides = [
        "trainer.max_steps=201", "trainer.save_steps=100", "trainer.permanent_steps=[201]",
        "trainer.per_device_train_batch_size=4", "trainer.num_generations=2", "generation.max_new_tokens=4",
    ]
    command = [sys.executable, "-m", "hackable_rl", "train", *(arg for o in overrides for arg in ("--set", o))]
    finished = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stderr[-2000:]
    console = (finished.stdout + finished.stderr).splitlines()
    assert len(console) <= 30, "\n".join(console)
    assert not any("database tables" in line for line in console), "\n".join(console)  # MLflow's schema set-up

    config = load_resolved("params.yaml", overrides)
    run_id = read_run_info(Storage.of(config.storage).run_dir(config.run_name))["mlflow_run_id"]
    uri = tracking_uri(config.storage.cache_dir)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # load_table searches runs through the default store
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    tables = _listed_tables(client, run_id)
    assert tables == [generations_table(first) for first in (1, 51, 101, 151, 201)]
    steps = []
    for table in tables:
        steps += client.load_table(run.info.experiment_id, table, run_ids=[run_id])["step"].tolist()
    assert steps == [step for step in range(1, 202) for _ in range(4)]
    if importlib.util.find_spec("psutil") is not None:  # system metrics are on when psutil is installed
        assert any(key.startswith("system/") for key in run.data.metrics)
