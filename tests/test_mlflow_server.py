"""A real tracking server (scripts/mlflow-server.sh: MLflow on PostgreSQL, docs/scale-out.md): two
trainings logging to it at once, two runs creating the same new experiment, model and dataset at
once, and a server that goes down mid-run, after which `hackable-rl sync` leaves nothing missing.

Slow (`make test-slow`): each test starts PostgreSQL and MLflow (about 10-30 s), and skips where
PostgreSQL cannot be installed or started.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.tracking.views import chart_name
from mlflow_server_fixture import Server, server_fixture  # noqa: F401 (the `server` fixture)

pytestmark = pytest.mark.slow

OFFLINE_WARNINGS = ("continuing offline", "logging locally only")  # the tracker's two warnings

log = logging.getLogger(__name__)


@pytest.fixture(name="trainings")
def trainings_fixture() -> Iterator[list[subprocess.Popen]]:
    """The trainings a test starts: any still running at teardown (a failed test) is killed, before
    the server stops."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # in case it failed while frozen
            process.kill()
            process.wait()


# --------------------------------------------------------------------------- running the CLI


def _cli() -> list[str]:
    """`hackable-rl` of the tests' environment (its console script, or the module without one)."""
    script = Path(sys.executable).with_name("hackable-rl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hackable_rl"]


def _copy_project(tiny_project: Path, folder: Path) -> Path:
    shutil.copytree(tiny_project, folder)
    return folder


def _console(project: Path) -> Path:
    return project / "console.txt"  # a file, not a pipe: a full pipe would stall a training nobody reads yet


def _start_training(project: Path, uri: str, run_name: str, *overrides: str) -> subprocess.Popen:
    """`hackable-rl train` in `project`, logging to the server, on one torch thread."""
    command = [*_cli(), "train", "--config", "params.yaml", "--set", f"tracking.run_name={run_name}",
               "--set", "torch_threads=1", *(part for item in overrides for part in ("--set", item))]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
    with _console(project).open("w") as console:
        return subprocess.Popen(command, cwd=project, env=env, stdout=console, stderr=subprocess.STDOUT)


def _finished(process: subprocess.Popen, project: Path, timeout_s: float = 900) -> str:
    """The console of a training that must succeed."""
    process.wait(timeout=timeout_s)
    console = _console(project).read_text()
    assert process.returncode == 0, console[-3000:]
    return console


def _run_dir(project: Path, run_name: str) -> Path:
    return project / "cache" / "artifacts" / "runs" / run_name


# --------------------------------------------------------------------------- what the server holds


def _local_points(run_dir: Path) -> dict[str, dict[int, float]]:
    """metric -> step -> value of every finite number in metrics.jsonl (what the tracker sends)."""
    points: dict[str, dict[int, float]] = {}
    for row in read_jsonl(run_dir / "metrics.jsonl"):
        for key, value in row.items():
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                points.setdefault(key, {})[row["step"]] = float(value)
    return points


def _assert_every_point_once(client: MlflowClient, run_id: str, run_dir: Path) -> None:
    """Each metric of each step of metrics.jsonl is on the server once, with its value."""
    local = _local_points(run_dir)
    assert "judge/correctness" in local and "trl/loss" in local
    tags = client.get_run(run_id).data.tags
    for key, by_step in local.items():
        if f"constant.{key}" in tags:  # a flat diagnostic: one tag, no chart (training/constant_series.py)
            assert {float(tags[f"constant.{key}"])} == set(by_step.values()), key
            assert not client.get_metric_history(run_id, key), key
            continue
        history = client.get_metric_history(run_id, chart_name(key))
        steps = [point.step for point in history]
        assert sorted(steps) == sorted(by_step), f"{key}: server has steps {sorted(steps)}, run {sorted(by_step)}"
        for point in history:
            assert point.value == pytest.approx(by_step[point.step], rel=1e-9, abs=1e-12), (key, point.step)


def _table(client: MlflowClient, run_id: str, artifact_file: str, scratch: Path) -> pd.DataFrame:
    """A generation table as the UI reads it: listed as a table of the run, and its rows.
    (Not `MlflowClient.load_table`: it searches the runs of the global tracking URI, not the client's.)"""
    listed = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert {"path": artifact_file, "type": "table"} in listed, listed
    return pd.read_json(client.download_artifacts(run_id, artifact_file, str(scratch)), orient="split")


def _assert_run_is_complete(
    client: MlflowClient, run_dir: Path, server: Server, permanent: list[int], scratch: Path
) -> None:
    """run.json, the MLflow run, its tables and artifacts agree with the run folder: a FINISHED run
    with every step and every permanent checkpoint, and no Model Registry version (evaluation registers)."""
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["tracking_pending"] is False, info
    run_id = info["mlflow_run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    _assert_every_point_once(client, run_id, run_dir)

    records = [row for path in sorted((run_dir / "generations").glob("step-*.jsonl")) for row in read_jsonl(path)]
    table = _table(client, run_id, "generations/steps-00001-00050.json", scratch)
    assert len(table) == len(records) and sorted(set(table["step"])) == sorted({r["step"] for r in records})
    logged = {a.path for a in client.list_artifacts(run_id)} | {a.path for a in client.list_artifacts(run_id, "summary")}
    assert {"config.yaml", "payoff.json", "environment.json", "summary/train.json"} <= logged, logged

    assert client.search_model_versions(f"run_id = '{run_id}'") == []
    assert info["checkpoint_artifacts"] == {str(step): f"checkpoints/permanent/step-{step}" for step in permanent}
    for step in permanent:
        files = {a.path.rsplit("/", 1)[-1] for a in client.list_artifacts(run_id, f"checkpoints/permanent/step-{step}")}
        assert {"model.safetensors", "checkpoint.json", "version.json"} <= files, files
    # artifacts went through the server into its --artifacts-destination, not into the run folder
    assert len(list((server.state / "artifacts").rglob(f"{run_id}/**/step-{permanent[-1]}/model.safetensors"))) == 1


# --------------------------------------------------------------------------- the tests


def test_two_trainings_at_once_log_everything_to_the_server(server, trainings, tiny_project, tmp_path):
    names = ("concurrent-a", "concurrent-b")
    projects = [_copy_project(tiny_project, tmp_path / name) for name in names]
    started = time.monotonic()
    processes = [_start_training(project, server.uri, name) for project, name in zip(projects, names, strict=True)]
    trainings.extend(processes)
    consoles = [_finished(process, project) for process, project in zip(processes, projects, strict=True)]
    log.info("two concurrent 3-step trainings: %.1f s", time.monotonic() - started)

    for console in consoles:
        assert not any(warning in console for warning in OFFLINE_WARNINGS), console[-3000:]
    client = MlflowClient(server.uri)
    for project, name in zip(projects, names, strict=True):
        _assert_run_is_complete(client, _run_dir(project, name), server, [2, 3], tmp_path)


def _at_once(create) -> list:
    """`create(client, index)` in two threads released together, each with its own client, as two
    processes would be; what each returned, or the exception it raised."""
    barrier, outcomes = threading.Barrier(2, timeout=60), [None, None]

    def one(index: int) -> None:
        client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
        barrier.wait()
        try:
            outcomes[index] = create(client, index)
        except Exception as error:  # returned, not raised: a thread's exception would be lost
            outcomes[index] = error

    threads = [threading.Thread(target=one, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def _race_once(uri: str, name: str) -> None:
    """Two runs create experiment `name`, then its first model version, then log one new dataset, at once."""
    from hackable_rl.tracking.client_calls import _log_input, create_model_version
    from hackable_rl.tracking.opening import _experiment_id

    experiments = _at_once(lambda client, _: _experiment_id(client, name, "cache", uri))
    assert experiments[0] == experiments[1] and isinstance(experiments[0], str), experiments
    client = MlflowClient(uri)
    runs = [client.create_run(experiments[0]).info.run_id for _ in range(2)]
    versions = _at_once(lambda client, i: create_model_version(client, runs[i], name, "model", {"step": 1}, ""))
    assert all(isinstance(v, str) for v in versions) and sorted(versions) == ["1", "2"], versions
    digest = name.encode().hex()[:32]
    logged = _at_once(lambda client, i: _log_input(client, runs[i], "race/train", digest, "file:///x", "training", {}))
    assert logged == [None, None], logged
    for run_id in runs:
        assert [d.dataset.name for d in client.get_run(run_id).inputs.dataset_inputs] == ["race/train"]


def test_two_runs_creating_one_new_experiment_model_and_dataset_at_once_both_succeed(server):
    """Two runs started at once against a new store both find no experiment (then no registered
    model, then no dataset) and both create it; the second create meets the unique key. A failure
    here would switch that run offline for good. Five rounds: one round races only most of the time."""
    for round_ in range(5):
        _race_once(server.uri, f"race-{round_}")


def _wait_for_delivered_checkpoint(process: subprocess.Popen, project: Path, run_dir: Path, step: int,
                                   timeout_s: float = 600) -> None:
    """Until the run has delivered checkpoint `step` to MLflow (the last thing a flush sends)."""
    events_path = run_dir / "tracking-events.jsonl"
    deadline = time.monotonic() + timeout_s
    while True:
        events = read_jsonl(events_path, torn_tail_ok=True) if events_path.exists() else []
        if any(e["event"] == "checkpoint" and e["delivered"] and e["artifact_path"].endswith(f"/step-{step}")
               for e in events):
            return
        assert process.poll() is None, f"training ended before step {step} was delivered: {_console(project).read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"step {step} not delivered within {timeout_s} s"
        time.sleep(0.1)


def test_a_server_down_mid_run_loses_nothing_once_synced(server, trainings, tiny_project, tmp_path):
    project = _copy_project(tiny_project, tmp_path / "outage")
    run_dir = _run_dir(project, "outage")
    process = _start_training(project, server.uri, "outage", "trainer.max_steps=6", "trainer.save_steps=2",
                              "trainer.permanent_steps=[2,4]")
    trainings.append(process)
    _wait_for_delivered_checkpoint(process, project, run_dir, step=2)
    # Frozen while the server goes down, so that the outage surely falls inside the run.
    os.kill(process.pid, signal.SIGSTOP)
    try:
        server.stop()
    finally:
        os.kill(process.pid, signal.SIGCONT)
    console = _finished(process, project)
    assert "continuing offline" in console, console[-3000:]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["tracking_pending"] is True, info
    assert not all(event["delivered"] for event in read_jsonl(run_dir / "tracking-events.jsonl"))

    log.info("server restart (existing cluster): %.1f s", server.start())
    client = MlflowClient(server.uri)
    before = {point.step for point in client.get_metric_history(info["mlflow_run_id"], "judge/correctness")}
    assert {1, 2} <= before < set(range(1, 7)), before  # what the server got before it went down
    assert client.get_run(info["mlflow_run_id"]).info.status == "RUNNING"  # only sync can end it now

    env = {**os.environ, "MLFLOW_TRACKING_URI": server.uri}
    synced = subprocess.run([*_cli(), "sync", str(run_dir)], cwd=project, env=env, capture_output=True, text=True)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert f"uploaded to MLflow run {info['mlflow_run_id']}" in synced.stdout
    _assert_run_is_complete(client, run_dir, server, [2, 4, 6], tmp_path)
    assert all(event["delivered"] for event in read_jsonl(run_dir / "tracking-events.jsonl"))
    again = subprocess.run([*_cli(), "sync", str(run_dir)], cwd=project, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and ": 0 events uploaded" in again.stdout, again.stdout + again.stderr
