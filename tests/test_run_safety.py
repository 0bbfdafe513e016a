"""A run's files stay whole: one writer per run folder, outputs that never replace what is not a file,
a resume that falls back past a corrupt checkpoint (in the files and in MLflow), a sync that fails
loudly and continues one MLflow run, and no credential of a tracking URI anywhere."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_json, write_jsonl
from hackable_rl.core.run_lock import run_lock
from hackable_rl.core.storage import Storage
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.rewind import forget_steps_after
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker
from hackable_rl.training.checkpoint_check import checkpoint_problem
from hackable_rl.training.checkpoints import last_resumable
from hackable_rl.training.run import run_training
from hackable_rl.training.run_dir import create_run_dir

pytestmark = pytest.mark.usefixtures("fresh_logging")


# --------------------------------------------------------------------------- one writer


def _hold_lock(run_dir: Path) -> subprocess.Popen:
    """Another process that holds the run folder's lock until it is killed."""
    code = ("import sys, time; from pathlib import Path; from hackable_rl.core.run_lock import run_lock\n"
            "with run_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_writer_exits_2_naming_the_first_and_a_killed_one_holds_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"storage": {"cache_dir": "cache"},
                                                          "tracking": {"enabled": False}}))
    config = load_resolved("params.yaml")
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    create_run_dir(run_dir, config)
    (run_dir / EVENT_LOG_NAME).write_text('{"event": "params", "data": {}, "delivered": false}\n')
    before = (run_dir / "run.json").read_bytes()
    holder = _hold_lock(run_dir)
    try:
        result = CliRunner().invoke(app, ["train", "--resume", "auto"])
        synced = CliRunner().invoke(app, ["sync", str(run_dir)])
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert result.exit_code == 2 and synced.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {run_dir}: another process (PID {holder.pid}) is writing this run; wait for it to "
                      "end, or stop it first (a killed process holds no lock: .writer.lock is then free)"]
    assert f"PID {holder.pid}" in synced.stderr
    assert (run_dir / "run.json").read_bytes() == before  # the refused writer wrote nothing
    with run_lock(run_dir):  # kill -9 released it
        assert (run_dir / ".writer.lock").read_text().strip() == str(os.getpid())


@pytest.fixture
def locked_before_its_pid(tmp_path) -> Iterator[Path]:
    """A run folder whose lock is taken the way a holder takes it, before it has written its PID: the
    file still names a killed earlier holder (a process that has ended)."""
    import fcntl

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()
    (run_dir / ".writer.lock").write_text(f"{killed.pid}\n")
    with open(run_dir / ".writer.lock", "a+", encoding="utf-8") as handle:  # closing it releases the lock
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield run_dir


def test_a_refused_writer_names_the_holder_not_the_killed_process_whose_pid_the_file_still_holds(
        locked_before_its_pid):
    run_dir = locked_before_its_pid
    writes_its_pid = threading.Timer(0.3, lambda: (run_dir / ".writer.lock").write_text(f"{os.getpid()}\n"))
    writes_its_pid.start()
    try:
        with pytest.raises(UserError, match=rf"another process \(PID {os.getpid()}\) is writing this run"):
            with run_lock(run_dir):
                pass
    finally:
        writes_its_pid.join()


def test_a_holder_that_never_writes_its_pid_is_named_unknown(locked_before_its_pid, monkeypatch):
    monkeypatch.setattr("hackable_rl.core.run_lock.HOLDER_WAIT_S", 0.2)
    with pytest.raises(UserError, match=r"another process \(PID unknown\)"):
        with run_lock(locked_before_its_pid):
            pass


def test_a_writer_that_lets_go_of_the_lock_leaves_no_pid_behind(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with run_lock(run_dir):
            assert (run_dir / ".writer.lock").read_text() == f"{os.getpid()}\n"
            raise RuntimeError("the body failed")
    assert (run_dir / ".writer.lock").read_text() == ""  # a live process that no longer holds it is never named


def test_overwrite_keeps_the_lock_file_that_keeps_a_second_writer_out(tmp_path):
    from hackable_rl.training.run_dir import make_room

    run_dir = tmp_path / "run"
    with run_lock(run_dir):
        write_json(run_dir / "run.json", {"created_by": "hackable-rl"})
        (run_dir / "generations").mkdir()
        make_room(run_dir, overwrite=True)
        assert [p.name for p in run_dir.iterdir()] == [".writer.lock"]
        with pytest.raises(UserError, match="another process"):
            with run_lock(run_dir):
                pass


# --------------------------------------------------------------------------- safe outputs


def test_outputs_never_replace_a_device_fifo_or_folder_and_write_through_a_symlink(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, kind in ((Path("/dev/null"), "a character device"), (fifo, "a FIFO"), (tmp_path, "a folder")):
        with pytest.raises(UserError, match=kind):
            write_json(target, {"a": 1})
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()

    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    write_json(link, {"a": 1})
    assert link.is_symlink() and json.loads(real.read_text()) == {"a": 1}


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    out = tmp_path / "rows.jsonl"
    write_jsonl(out, [{"a": 1}])
    with pytest.raises(ValueError):
        write_jsonl(out, [{"a": 2}, {"a": float("nan")}])  # NaN is refused half-way through
    assert read_jsonl(out) == [{"a": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


# --------------------------------------------------------------------------- checkpoints


def _checkpoint(folder: Path, step: int) -> Path:
    """A resumable checkpoint's files as TRL writes them (small): safetensors, a torch.save zip, JSON."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file({"w": torch.arange(64, dtype=torch.float32)}, folder / "model.safetensors")
    torch.save({"state": {"w": torch.zeros(64)}}, folder / "optimizer.pt")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    return folder


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt", "trainer_state.json"])
def test_a_truncated_file_makes_the_newest_checkpoint_fall_back_to_the_previous(tmp_path, damaged, caplog):
    resume = tmp_path / "checkpoints" / "resume"
    _checkpoint(resume / "checkpoint-2", 2)
    newest = _checkpoint(resume / "checkpoint-4", 4)
    assert checkpoint_problem(newest, 4) is None
    _truncate(newest / damaged)
    assert damaged in checkpoint_problem(newest, 4)

    with caplog.at_level(logging.WARNING):
        assert last_resumable(tmp_path) == (resume / "checkpoint-2", 2)
    assert (tmp_path / "abandoned" / "resume" / "checkpoint-4" / damaged).exists()  # set aside, not deleted
    assert [r.message.count("\n") for r in caplog.records] == [0] and "is corrupt" in caplog.records[0].message


def test_a_checkpoint_of_another_step_is_refused(tmp_path):
    folder = _checkpoint(tmp_path / "checkpoint-4", 6)
    assert checkpoint_problem(folder, 4) == "trainer_state.json: global_step 6, expected 4"


def test_mlflow_forgets_the_abandoned_steps_but_not_its_system_metrics(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("rewind")).info.run_id
    events = []
    for step in (1, 2, 3, 4):
        client.log_metric(run_id, "judge/correctness", step / 10, step=step)
        client.log_metric(run_id, "system/cpu", 50.0, step=step)
        events.append({"event": "metrics", "step": step, "delivered": True})
    client.create_registered_model("p-corrupted")
    for step in (2, 4):  # checkpoints an evaluation registered before the kill
        client.create_model_version("p-corrupted", source=f"runs:/{run_id}/checkpoints/permanent/step-{step}",
                                    run_id=run_id, tags={"step": str(step)})
    tracker = Tracker(client, run_id, None, f"sqlite:///{tmp_path / 'mlflow.db'}")

    forget_steps_after(tracker, events, 2)

    assert [m.step for m in client.get_metric_history(run_id, "judge/correctness")] == [1, 2]
    assert client.get_run(run_id).data.metrics["judge/correctness"] == 0.2  # the latest value is step 2's again
    assert [m.step for m in client.get_metric_history(run_id, "system/cpu")] == [1, 2, 3, 4]
    abandoned = {v.tags["step"]: v.tags.get("abandoned") for v in client.search_model_versions(f"run_id = '{run_id}'")}
    assert abandoned == {"2": None, "4": "resumed from step 2"}  # kept, and marked


def test_mlflow_forgets_points_the_event_log_never_named(tmp_path):
    """A kill between MLflow's receipt of step 3's points and their event: the event log names steps
    1-2 only, yet the resumed run trains step 3 again, so the held point goes (the CI failure
    [1, 2, 3, 3, 4] of the kill-and-resume test)."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("rewind")).info.run_id
    for step in (1, 2, 3):
        client.log_metric(run_id, "judge/correctness", step / 10, step=step)
    events = [{"event": "metrics", "step": step, "delivered": True} for step in (1, 2)]
    tracker = Tracker(client, run_id, None, f"sqlite:///{tmp_path / 'mlflow.db'}")

    forget_steps_after(tracker, events, 2)

    assert [m.step for m in client.get_metric_history(run_id, "judge/correctness")] == [1, 2]


def _records(run_dir: Path) -> list[int]:
    return [row["step"] for path in sorted((run_dir / "generations").glob("step-*.jsonl")) for row in read_jsonl(path)]


def _resume_past_a_corrupt_checkpoint(project: Path, damaged: str) -> None:  # about 8 s
    """Trains 4 steps (checkpoints 2 and 4), damages checkpoint 4, then continues to step 6: the run
    resumes from checkpoint 2, and every step is once in the files and in MLflow."""
    config = load_resolved("params.yaml", ["trainer.max_steps=4"])
    first = run_training(config)
    _truncate(first.run_dir / "checkpoints" / "resume" / "checkpoint-4" / damaged)

    # a longer horizon, so the finished run has steps to continue (params.yaml's schedule needs the flag)
    result = run_training(load_resolved("params.yaml", ["trainer.max_steps=6"]), resume="auto", allow_config_change=True)

    assert result.run_id == first.run_id and result.final_step == 6
    assert _records(result.run_dir) == [step for step in range(1, 7) for _ in range(8)]
    assert [row["step"] for row in read_jsonl(result.run_dir / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
    assert (result.run_dir / "abandoned" / "resume" / "checkpoint-4" / damaged).exists()
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    for key in ("judge/correctness", "reward/observed"):
        assert sorted(m.step for m in client.get_metric_history(result.run_id, key)) == [1, 2, 3, 4, 5, 6]
    steps = [row["step"] for row in read_jsonl(result.run_dir / "metrics.jsonl")]
    logged = {m.step: m.value for m in client.get_metric_history(result.run_id, "judge/correctness")}
    local = dict(zip(steps, (row["judge/correctness"] for row in read_jsonl(result.run_dir / "metrics.jsonl")),
                     strict=True))
    assert logged == local  # MLflow holds the resumed trajectory's values, not the abandoned ones


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt", "trainer_state.json"])
def test_a_corrupt_newest_checkpoint_resumes_from_the_previous_one_exactly(project, damaged):
    _resume_past_a_corrupt_checkpoint(project, damaged)


# --------------------------------------------------------------------------- sync


def test_a_sync_that_fails_half_way_exits_2_and_its_retry_continues_one_run(tmp_path, monkeypatch):
    from mlflow.exceptions import MlflowException

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"storage": {"cache_dir": str(tmp_path / "cache")},
                                                          "tracking": {"experiment_name": "sync"}}))
    config = load_resolved(tmp_path / "params.yaml")
    run_dir = tmp_path / "run"
    offline = Tracker(None, None, run_dir / EVENT_LOG_NAME, "http://127.0.0.1:9")
    for step in (1, 2, 3):
        offline.log_metrics({"judge/correctness": step / 10}, step=step)
    write_json(run_dir / "run.json", {"created_by": "hackable-rl", "run_name": "offline", "kind": "train",
                                      "mlflow_run_id": None})
    calls = {"count": 0}
    original = MlflowClient.log_batch

    def fail_on_the_second_batch(self, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 2:
            raise MlflowException("the store went away")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", fail_on_the_second_batch)
    from hackable_rl.tracking.sync import sync_run

    with pytest.raises(UserError, match=r"failed after 1 of 3 events .*2 remain") as failed:
        sync_run(config, run_dir)
    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    assert run_id and run_id in str(failed.value)
    assert [e["delivered"] for e in read_jsonl(run_dir / EVENT_LOG_NAME)] == [True, False, False]

    assert sync_run(config, run_dir) == {"run_id": run_id, "replayed": 2, "pending": 0}
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    runs = client.search_runs([client.get_experiment_by_name("sync").experiment_id])
    assert [run.info.run_id for run in runs] == [run_id] and runs[0].info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(run_id, "judge/correctness")) == [1, 2, 3]


# --------------------------------------------------------------------------- secrets


SECRET = "hunter2-s3cret"


def test_no_credential_of_a_tracking_uri_reaches_the_console_the_run_folder_or_the_store(project, monkeypatch,
                                                                                          caplog):
    """The console is what the command prints and what it logs (caplog holds every log record, as
    the CLI's handler prints it); the files are everything under the project, the store's included."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{SECRET}@127.0.0.1:9/?token={SECRET}")
    with caplog.at_level(logging.INFO):
        trained = CliRunner().invoke(app, ["train", "--set", "trainer.max_steps=2"])
    assert trained.exit_code == 0, trained.output
    run_dir = project / "cache" / "artifacts" / "runs" / "baseline-flip-r0.2-s0"
    assert json.loads((run_dir / "run.json").read_text())["tracking_uri"] == "http://***@127.0.0.1:9/?token=***"
    assert "http://***@127.0.0.1:9/?token=*** is unreachable" in caplog.text  # the warning is there, masked

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the run now syncs into the project's own store
    synced = CliRunner().invoke(app, ["sync", str(run_dir)])
    assert synced.exit_code == 0, synced.output
    written = [path for path in project.rglob("*") if path.is_file()]
    assert any(path.name == "mlflow.db" for path in written)
    leaks = [str(path) for path in written if SECRET.encode() in path.read_bytes()]
    assert leaks == [] and SECRET not in trained.output + synced.output + caplog.text


# --------------------------------------------------------------------------- two writers, real processes


def _train(project: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hackable_rl", "train", "--set", "trainer.max_steps=4", *extra]


@pytest.mark.slow
def test_two_resumes_at_once_one_trains_and_the_other_exits_2(project):
    run_dir = project / "cache" / "artifacts" / "runs" / "baseline-flip-r0.2-s0"
    process = subprocess.Popen(_train(project), cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not (run_dir / "generations" / "step-00003.jsonl").exists():  # past checkpoint 2
        assert process.poll() is None and time.time() < deadline, "training ended before it could be killed"
        time.sleep(0.1)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    resumes = [subprocess.Popen(_train(project, "--resume", "auto"), cwd=project, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(resume.pid, *resume.communicate(timeout=600), resume.returncode) for resume in resumes]
    codes = sorted(code for *_, code in outcomes)
    assert codes == [0, 2], [err[-2000:] for _, _, err, _ in outcomes]
    winner = next(pid for pid, _, _, code in outcomes if code == 0)
    refused = next(err for _, _, err, code in outcomes if code == 2)
    assert f"(PID {winner}) is writing this run" in refused and "Traceback" not in refused
    assert _records(run_dir) == [step for step in range(1, 5) for _ in range(8)]
    assert [row["step"] for row in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    info = json.loads((run_dir / "run.json").read_text())
    client = MlflowClient(tracking_uri(str(project / "cache")))
    assert sorted(m.step for m in client.get_metric_history(info["mlflow_run_id"], "judge/correctness")) == [1, 2, 3, 4]
