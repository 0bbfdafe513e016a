"""The tracking server's processes fail under a training, for real: the `server` mode of
scripts/mlflow-server.sh (MLflow on PostgreSQL, docs/scale-out.md) on a free port. First the MLflow server
is killed (SIGKILL to its process group) mid-run and started again while the run goes on; then PostgreSQL
itself is stopped as a crash stops it (`pg_ctl stop -m immediate`) mid-run and started again, MLflow staying up.

Each time the run warns once that it continues offline (a bounded wait: one retry of a request, no stall),
finishes, and marks run.json pending; the points MLflow held before the fault are still there, unchanged;
`hackable-rl sync` then completes the same MLflow run: every step's metrics once (none lost, none
duplicated), the checkpoints in the server's artifact store byte for byte the run's, the run FINISHED.

It skips where PostgreSQL cannot be installed or started (the script installs it with apt-get as root;
without root and without PostgreSQL's initdb and pg_ctl, there is nothing to run)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient

from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.core.storage import file_sha256
from mlflow_server_fixture import Server, _free_port
from test_mlflow_server import (
    _assert_run_is_complete,
    _cli,
    _console,
    _copy_project,
    _finished,
    _run_dir,
    _start_training,
    _wait_for_delivered_checkpoint,
    trainings_fixture,  # noqa: F401 (the `trainings` fixture)
)

pytestmark = pytest.mark.faults
PERMANENT = [2, 4, 6]  # trainer.permanent_steps [2, 4] and the last step
TRAINING = ("trainer.max_steps=6", "trainer.save_steps=2", "trainer.permanent_steps=[2,4]")
NOTICE_S = 300  # a generous bound on the run noticing the outage (10 s timeout, one retry, a loaded machine)


@pytest.fixture(scope="module")
def running_server() -> Iterator[Server]:
    """One server for the module's tests (a fresh cluster takes a while to make); stopped and removed
    afterwards. The state folder is in the system temp folder, which user postgres can enter."""
    state = Path(tempfile.mkdtemp(prefix="mlflow-server-faults-"))
    state.chmod(0o711)
    server = Server(state, _free_port())
    try:
        server.start()  # skips where PostgreSQL cannot be installed or started
        yield server
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def server(running_server: Server) -> Server:
    """The module's server, both processes up (an earlier test may have failed with one of them down)."""
    if running_server.status() != 0:
        running_server.start()
    return running_server


# --------------------------------------------------------------------------- the faults


def _kill_mlflow(server: Server) -> None:
    """SIGKILL to the MLflow server's process group (the script starts it with setsid): this test's
    server, checked by its command line naming this state folder."""
    pid = int((server.state / "mlflow.pid").read_text())
    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "mlflow" in command and str(server.state) in command and os.getpgid(pid) == pid, command
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, "the MLflow server outlived SIGKILL"
        time.sleep(0.1)
    assert server.status() != 0


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended: only its parent's wait is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pg_ctl(server: Server, *arguments: str) -> None:
    """pg_ctl on the server's cluster, as the user that runs it (postgres, when the tests run as root)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda path: int(path.parts[-3]))
    if not found:
        pytest.skip("PostgreSQL's pg_ctl is not in /usr/lib/postgresql/*/bin")
    command = [str(found[-1]), *arguments, "-D", str(server.state / "postgres"), "-w", "-t", "60"]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _crash_postgres(server: Server) -> None:
    _pg_ctl(server, "stop", "-m", "immediate")  # no clean shutdown: the next start recovers from the WAL


def _start_postgres(server: Server) -> None:
    port = (server.state / "postgres.port").read_text().strip()
    _pg_ctl(server, "start", "-l", str(server.state / "postgres.log"), "-o", f"-p {port}")


# --------------------------------------------------------------------------- what survived


def _points(client: MlflowClient, run_id: str) -> set[tuple[str, int, float, int]]:
    """Every metric point of the run on the server: (key, step, value, timestamp)."""
    keys = client.get_run(run_id).data.metrics
    return {(key, point.step, point.value, point.timestamp)
            for key in keys for point in client.get_metric_history(run_id, key)}


def _checkpoint_hashes(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): file_sha256(path) for path in sorted(folder.rglob("*")) if path.is_file()}


def _server_log(server: Server) -> str:
    """The end of the MLflow server's log, for a failure's message."""
    return "\n--- mlflow.log\n" + (server.state / "mlflow.log").read_text(errors="replace")[-6000:]


def _wait_for_warning(process: subprocess.Popen, project: Path) -> None:
    """Until the run says it continues offline (within NOTICE_S), then frozen, still mid-run."""
    deadline = time.monotonic() + NOTICE_S
    while "continuing offline" not in _console(project).read_text():
        assert process.poll() is None, f"the run ended without noticing the outage: {_console(project).read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no warning within {NOTICE_S} s of the outage"
        time.sleep(0.1)
    os.kill(process.pid, signal.SIGSTOP)
    assert process.poll() is None, "the run ended before the restart"


def _outage_run(server: Server, trainings: list, tiny_project: Path, folder: Path, fail, restart) -> None:
    """A training whose store fails (`fail`) once checkpoint 2 is delivered and is restarted (`restart`)
    once the run has noticed, while the run is frozen mid-way; then what survived, and the sync."""
    name = folder.name
    project = _copy_project(tiny_project, folder)
    run_dir = _run_dir(project, name)
    process = _start_training(project, server.uri, name, *TRAINING)
    trainings.append(process)
    _wait_for_delivered_checkpoint(process, project, run_dir, step=2)
    os.kill(process.pid, signal.SIGSTOP)  # the fault falls between two steps' flushes, not after the last
    try:
        fail(server)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    _wait_for_warning(process, project)
    try:
        restart(server)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    console = _finished(process, project)
    problems = [line for line in console.splitlines() if "continuing offline" in line or "Traceback" in line]
    assert len(problems) == 1 and f"upload it later with `hackable-rl sync {run_dir}`" in problems[0], problems
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["tracking_pending"] is True, info
    assert info["checkpoint_artifacts"]["2"] == "checkpoints/permanent/step-2" and info["checkpoint_artifacts"]["6"] is None

    client = MlflowClient(server.uri)
    run_id = info["mlflow_run_id"]
    before = _points(client, run_id)
    steps_before = {step for key, step, *_ in before if key == "judge/correctness"}
    assert {1, 2} <= steps_before < set(range(1, 7)), steps_before
    local = _checkpoint_hashes(run_dir / "checkpoints" / "permanent")
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.uri}
    synced = subprocess.run([*_cli(), "sync", str(run_dir)], cwd=project, env=env, capture_output=True, text=True)
    assert synced.returncode == 0, synced.stderr[-3000:] + _server_log(server)
    assert f"uploaded to MLflow run {run_id}" in synced.stdout

    _assert_run_is_complete(client, run_dir, server, PERMANENT, folder)  # every step once, FINISHED, tables
    assert before <= _points(client, run_id)  # what the server held before the fault, unchanged
    assert _checkpoint_hashes(run_dir / "checkpoints" / "permanent") == local
    [uploaded] = (server.state / "artifacts").rglob(f"{run_id}/artifacts/checkpoints/permanent")
    assert _checkpoint_hashes(uploaded) == {**local, **{f"step-{s}/version.json": file_sha256(uploaded / f"step-{s}/version.json")
                                                        for s in PERMANENT}}
    again = subprocess.run([*_cli(), "sync", str(run_dir)], cwd=project, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and ": 0 events uploaded" in again.stdout, again.stdout + again.stderr
    assert all(event["delivered"] for event in read_jsonl(run_dir / "tracking-events.jsonl"))


def test_the_mlflow_server_killed_mid_run_and_restarted_loses_no_step_and_duplicates_none_once_synced(
        server, trainings, tiny_project, tmp_path):
    _outage_run(server, trainings, tiny_project, tmp_path / "server-killed", _kill_mlflow, Server.start)


def test_postgresql_crashed_mid_run_and_restarted_loses_no_step_and_duplicates_none_once_synced(
        server, trainings, tiny_project, tmp_path):
    _outage_run(server, trainings, tiny_project, tmp_path / "postgres-crashed", _crash_postgres, _start_postgres)
    assert server.status() == 0  # MLflow stayed up through it, and answers again


def test_a_completion_holding_nul_is_stored_on_postgresql(server, monkeypatch):
    """What the first version of this suite met in a sync: the tiny policy samples NUL, PostgreSQL's text
    refuses it (the server answers 500, so the run would go offline at that step). The previews write it
    `\\x00`; the span keeps the completion as sampled."""
    from hackable_rl.tracking.traces import step_trace_name, write_traces

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)  # what resolves the server's mlflow-artifacts: URIs
    client = MlflowClient(server.uri)
    experiment = client.create_experiment(f"nul-{time.time_ns()}")
    run_id = client.create_run(experiment).info.run_id
    completion = "<think>4\x00</think> \\boxed{4}"
    row = {"step": 1, "prompt_id": "p0", "prompt": "Problem: 2+2?\x00", "completion": completion, "reference": "4",
           "member.m0.reward": 1.0, "member.m0.reason": "clean", "reward": 1.0, "advantage": 0.0, "correct": True,
           "parsed": "4\x00", "reason": "right answer"}
    write_traces(client, run_id, [(step_trace_name(1), [row], {"step": "1", "run_name": "nul"})])
    [trace] = [t for t in client.search_traces(locations=[experiment]) if t.info.tags["mlflow.traceName"].endswith("#0")]
    assert trace.info.response_preview == "<think>4\\x00</think> \\boxed{4}"
    assert trace.info.request_preview == "Problem: 2+2?\\x00"
    assert trace.data.spans[0].outputs["completion"] == completion
