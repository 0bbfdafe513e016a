"""A disk that fills under an MLflow artifact upload, for real: the project's SQLite store with its
artifact folder on a tmpfs (mounted as root) that holds every artifact of a run except its first permanent
checkpoint. The upload fails; the run warns in one line naming the artifact folder and its free space and
trains on offline: its checkpoints and records are an unfailed run's byte for byte, and run.json names no
half-uploaded checkpoint. `hackable-rl sync` on the still-full disk fails in one line and loses nothing;
once space is back it completes: every step's metrics in MLflow once, the points MLflow held before the
fault unchanged, and the checkpoints in the artifact store byte for byte the run's.

A file-size limit (`ulimit -f`) cannot stand in where mounting is not permitted: the checkpoint MLflow
copies is first written, at the same size, into the run folder, so the limit would stop the training
instead (tests/faults/test_disk_full.py covers that)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.core.storage import file_sha256
from test_mlflow_server import _assert_every_point_once

pytestmark = pytest.mark.faults
PAGE = 4096  # tmpfs hands out whole pages
CHECKPOINTS = ("checkpoints/permanent/step-2", "checkpoints/permanent/step-3")  # the tiny project's permanent steps


def _env() -> dict[str, str]:
    """The project's own SQLite store (cache/mlflow), one torch thread."""
    return {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, "OMP_NUM_THREADS": "1"}


def _hackable_rl(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hackable_rl", *arguments], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=600)


def _train(folder: Path) -> subprocess.CompletedProcess:
    return _hackable_rl(folder, "train", "--set", "tracking.run_name=run", "--set", "torch_threads=1")


def _run_dir(folder: Path) -> Path:
    return folder / "cache" / "artifacts" / "runs" / "run"


def _client(folder: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{folder / 'cache' / 'mlflow' / 'mlflow.db'}")


def _hashes(folder: Path, *skip: str) -> dict[str, str]:
    return {str(path.relative_to(folder)): file_sha256(path) for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name not in skip}


def _kept(run_dir: Path) -> dict[str, str]:
    """What a failure must not touch: the permanent checkpoints and every step's generation records
    (less checkpoint.json, which names the run's own MLflow run)."""
    return {name: digest for name, digest in _hashes(run_dir, "checkpoint.json").items()
            if name.startswith(("checkpoints/permanent/", "generations/"))}


def _pages(files) -> int:
    return sum(-(-path.stat().st_size // PAGE) * PAGE for path in files)


def _room_for_all_but_checkpoints(artifacts: Path) -> int:
    """Every artifact of the unfailed run but its checkpoints (the tables, traces, config, summaries), one
    page spare: the step-2 checkpoint's flush comes before step 3's artifacts, so at most those pages plus
    one are free for its 80 kB of weights, and none of the rest can fail first."""
    files = [path for path in artifacts.rglob("*") if path.is_file() and "checkpoints" not in path.parts]
    return _pages(files) + PAGE


def _points(client: MlflowClient, run_id: str) -> set[tuple[str, int, float, int]]:
    """Every metric point of the run: (key, step, value, timestamp)."""
    keys = client.get_run(run_id).data.metrics
    return {(key, point.step, point.value, point.timestamp)
            for key in keys for point in client.get_metric_history(run_id, key)}


def _problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "continuing offline" in line or line.startswith(("error:", "Traceback"))]


def _mount(folder: Path, size: int) -> bool:
    folder.mkdir(parents=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def test_a_full_artifact_disk_warns_in_one_line_keeps_every_local_file_and_sync_completes_once_space_is_back(
        tiny_project: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    shutil.copytree(tiny_project, whole)
    unfailed = _train(whole)
    assert unfailed.returncode == 0 and not _problem_lines(unfailed.stderr), unfailed.stderr[-3000:]
    size = _room_for_all_but_checkpoints(whole / "cache" / "mlflow" / "artifacts")

    project = tmp_path / "project"
    shutil.copytree(tiny_project, project)
    artifact_root = project / "cache" / "mlflow" / "artifacts"  # the store's, before the experiment exists
    if not _mount(artifact_root, size):
        pytest.skip("mounting a tmpfs needs root here; a file-size limit would stop the training's own "
                    "checkpoint write before MLflow's copy of it")
    try:
        trained = _train(project)
        assert trained.returncode == 0, trained.stderr[-3000:]
        run_dir = _run_dir(project)
        info = json.loads((run_dir / "run.json").read_text())
        run_id = info["mlflow_run_id"]
        folder = artifact_root / run_id / "artifacts"
        lines = _problem_lines(trained.stderr)
        assert len(lines) == 1, lines
        assert f"failed during log_checkpoint (no space left in its artifact folder {folder} (" in lines[0], lines
        assert "MB free of" in lines[0] and f"free space there, then upload it later with `hackable-rl sync {run_dir}`" in lines[0]

        # the run trained on: its checkpoints and records are the unfailed run's, and nothing half-uploaded is named
        assert info["status"] == "finished" and info["tracking_pending"] is True, info
        assert info["checkpoint_artifacts"] == {"2": None, "3": None}, info
        assert _kept(run_dir) == _kept(_run_dir(whole))
        client = _client(project)
        before = _points(client, run_id)
        assert {step for key, step, *_ in before if key == "judge/correctness"} == {1, 2}  # sent before the checkpoint
        assert client.get_run(run_id).info.status == "RUNNING"  # only sync can end it now

        # sync on the still-full disk: one line, exit 2, nothing local changed
        local = _hashes(run_dir, "tracking-events.jsonl", "run.json")
        events = [{k: v for k, v in event.items() if k != "delivered"} for event in read_jsonl(run_dir / "tracking-events.jsonl")]
        refused = _hackable_rl(project, "sync", str(run_dir))
        assert refused.returncode == 2, refused.stderr[-3000:]
        [line] = _problem_lines(refused.stderr)
        assert line.startswith(f"error: {run_dir}: MLflow at sqlite:///"), line
        assert f"(log_checkpoint: no space left in its artifact folder {folder} (" in line and "run `hackable-rl sync` again" in line, line
        assert _hashes(run_dir, "tracking-events.jsonl", "run.json", "tracking-sync.jsonl") == local
        assert [{k: v for k, v in e.items() if k != "delivered"} for e in read_jsonl(run_dir / "tracking-events.jsonl")] == events

        subprocess.run(["mount", "-o", "remount,size=64m", str(artifact_root)], check=True)
        synced = _hackable_rl(project, "sync", str(run_dir))
        assert synced.returncode == 0, synced.stderr[-3000:]
        assert f"uploaded to MLflow run {run_id}" in synced.stdout
        info = json.loads((run_dir / "run.json").read_text())
        assert info["tracking_pending"] is False and info["mlflow_run_id"] == run_id
        assert info["checkpoint_artifacts"] == {"2": CHECKPOINTS[0], "3": CHECKPOINTS[1]}
        assert client.get_run(run_id).info.status == "FINISHED"
        _assert_every_point_once(client, run_id, run_dir)
        assert before <= _points(client, run_id)  # what MLflow held before the fault, unchanged
        assert _hashes(run_dir, "tracking-events.jsonl", "run.json", "tracking-sync.jsonl") == local
        for checkpoint in CHECKPOINTS:  # MLflow's copies are the run's files, byte for byte
            uploaded = _hashes(folder / checkpoint, "version.json")
            assert uploaded == _hashes(run_dir / checkpoint) and "model.safetensors" in uploaded, checkpoint
            assert (folder / checkpoint / "version.json").is_file()
        again = _hackable_rl(project, "sync", str(run_dir))
        assert again.returncode == 0 and ": 0 events uploaded" in again.stdout, again.stdout + again.stderr
    finally:
        subprocess.run(["umount", str(artifact_root)], capture_output=True)
