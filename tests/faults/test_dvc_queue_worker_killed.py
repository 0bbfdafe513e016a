"""A `dvc queue` worker killed mid-experiment, for real: a minimal DVC project (one `train` stage on the
tiny policy, the prepared data and warm start `dvc add`ed) queues an experiment (`dvc exp run --queue`,
`dvc queue start`), and once the training has written its second step every process of the worker (the
Celery worker, the experiment's executor, the stage's training) is killed with SIGKILL, as a lost node
or the OOM killer leaves it.

What DVC then does, and what the test holds it to: no partial result is read as a result (`dvc exp show`
lists the experiment with no metrics; no experiment ref is made; the workspace and its commit are as
before); DVC cannot tell the worker died, so the task stays `Running` with no worker until `dvc queue kill
NAME` marks it `Failed`, and `dvc queue logs NAME` shows its log up to the kill; the experiment queued again
runs to its end, every step once, and its records of the steps the killed run had finished are that run's
byte for byte. (A new queued workspace starts the training afresh: the killed run's folder stays in its own
temporary workspace under .dvc/tmp/exps.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dvc.api
import pytest
import yaml

from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.core.storage import file_sha256

pytestmark = pytest.mark.faults
BIN = Path(sys.executable).parent
STEPS = 40  # long enough that a kill at step 2 falls mid-training; short enough to rerun
RUN = "baseline-flip-r0.2-s0"  # the tiny project's default run name
TRAIN_STAGE = {
    "cmd": "hackable-rl train --overwrite --set torch_threads=1 --set tracking.enabled=false --metrics-dir metrics",
    "deps": ["cache/datasets/arith", "cache/models/tiny-arith-w0"],
    "params": ["seed", "trainer"],
    "outs": ["cache/artifacts/runs"],
    "metrics": [{"metrics/train.json": {"cache": False}}],
}
WAIT_S = 600


def _env() -> dict[str, str]:
    """The venv's commands first (the worker inherits this environment), one thread, no MLflow server."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _run(repo: Path, *command: str) -> str:
    result = subprocess.run(list(command), cwd=repo, env=_env(), capture_output=True, text=True, timeout=WAIT_S)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def _make_repo(tiny_project: Path, repo: Path) -> Path:
    """The tiny project as a Git + DVC repository with one `train` stage, its data and warm start tracked."""
    shutil.copytree(tiny_project, repo, ignore=shutil.ignore_patterns("metrics"))
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": TRAIN_STAGE}}, sort_keys=False))
    _run(repo, "git", "init", "-q")
    _run(repo, "git", "config", "user.email", "ci@example.com")
    _run(repo, "git", "config", "user.name", "ci")
    _run(repo, "dvc", "init", "-q")
    _run(repo, "dvc", "add", "-q", "cache/datasets/arith", "cache/models/tiny-arith-w0")
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-qm", "a one-stage pipeline")
    return repo


def _start_queue(repo: Path) -> None:
    """`dvc queue start`, its console to a file: the worker it detaches inherits the output, and would hold
    a pipe open."""
    with (repo / ".dvc" / "tmp" / "queue-start.log").open("a") as log:
        code = subprocess.run(["dvc", "queue", "start"], cwd=repo, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=WAIT_S).returncode
    assert code == 0, (repo / ".dvc" / "tmp" / "queue-start.log").read_text()[-3000:]


def _queue_processes(repo: Path) -> dict[int, str]:
    """pid -> command line of every DVC or hackable-rl process working in `repo` (its worker, executor and
    training run there or in its temporary workspaces): this test's processes, and no others."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if (cwd == str(repo) or cwd.startswith(f"{repo}/")) and ("dvc" in command or "hackable" in command):
            found[int(entry.name)] = command
    return found


def _kill_queue_processes(repo: Path) -> dict[int, str]:
    """SIGKILL to each of them, then until none is left; returns what was killed."""
    killed = _queue_processes(repo)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 60
    while _queue_processes(repo):
        assert time.monotonic() < deadline, f"still alive after SIGKILL: {_queue_processes(repo)}"
        time.sleep(0.1)
    return killed


def _queue_status(repo: Path) -> tuple[dict[str, str], str]:
    """Each task's state by experiment name, and the worker line of `dvc queue status`."""
    output = _run(repo, "dvc", "queue", "status")
    states = {}
    for line in output.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4 and not line.startswith("Worker status"):
            states[parts[1]] = parts[-1]
    return states, next((line for line in output.splitlines() if line.startswith("Worker status")), "")


def _wait_for(repo: Path, name: str, state: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while _queue_status(repo)[0].get(name) != state:
        assert time.monotonic() < deadline, f"{name} not {state} within {WAIT_S} s: {_queue_status(repo)}"
        time.sleep(2)


def _shown(repo: Path) -> dict[str, dict]:
    """Each experiment's `dvc exp show --json` data by name (the workspace and baseline left out)."""
    shown = json.loads(subprocess.run(["dvc", "exp", "show", "--json"], cwd=repo, env=_env(), capture_output=True,
                                      text=True, timeout=WAIT_S).stdout)
    return {rev["name"]: rev["data"] for row in shown for exp in row.get("experiments") or [] for rev in exp["revs"]}


def _metrics(data: dict) -> dict:
    """The experiment's metrics that DVC could read (a missing file is listed as an error, not a value)."""
    return {path: found["data"] for path, found in (data.get("metrics") or {}).items() if "data" in found}


def _tracked(repo: Path) -> dict[str, str]:
    """What the experiments must leave as it was: the committed files and the tracked data, by hash."""
    files = [repo / name for name in ("params.yaml", "dvc.yaml")]
    files += [path for folder in ("cache/datasets/arith", "cache/models/tiny-arith-w0") for path in (repo / folder).rglob("*")]
    return {str(path.relative_to(repo)): file_sha256(path) for path in sorted(files) if path.is_file()}


def test_a_queue_worker_killed_mid_experiment_leaves_no_result_is_reported_failed_with_its_log_and_reruns(
        tiny_project: Path, tmp_path: Path) -> None:
    repo = _make_repo(tiny_project, tmp_path / "repo")
    before = _tracked(repo)
    try:
        _run(repo, "dvc", "exp", "run", "--queue", "-n", "killed", "-S", f"trainer.max_steps={STEPS}")
        _start_queue(repo)
        deadline = time.monotonic() + WAIT_S
        while not (found := list(repo.glob(f".dvc/tmp/exps/tmp*/cache/artifacts/runs/{RUN}/generations/step-00002.jsonl"))):
            assert time.monotonic() < deadline, f"no step 2 within {WAIT_S} s: {_queue_status(repo)}"
            time.sleep(0.05)
        killed = _kill_queue_processes(repo)
        assert any("queue-worker" in command for command in killed.values()), killed
        assert any("exec-run" in command for command in killed.values()), killed
        assert any(" train " in command for command in killed.values()), killed

        # the kill fell mid-training: the run folder in the temporary workspace is half a run
        half = found[0].parents[1]
        done = [row["step"] for row in read_jsonl(half / "metrics.jsonl", torn_tail_ok=True)]
        assert 2 <= len(done) < STEPS and done == list(range(1, len(done) + 1)), done
        assert json.loads((half / "run.json").read_text())["status"] == "running"
        assert not (half.parents[3] / "metrics" / "train.json").exists()
        half_records = {step: (half / "generations" / f"step-{step:05d}.jsonl").read_bytes() for step in done}

        # no partial result: no metrics shown, no experiment made; DVC still believes it runs
        assert _metrics(_shown(repo)["killed"]) == {}
        assert "killed" not in _run(repo, "dvc", "exp", "list", "--name-only").split()
        states, workers = _queue_status(repo)
        assert states["killed"] == "Running" and workers == "Worker status: 0 active, 0 idle", (states, workers)

        # `dvc queue kill` marks it failed; it signals the executor's recorded pid, so only while that is dead
        [info] = (repo / ".dvc" / "tmp" / "exps" / "run").glob("*/*.json")
        if Path(f"/proc/{json.loads(info.read_text())['pid']}").exists():
            pytest.skip("the killed executor's pid already runs another process: `dvc queue kill` would signal it")
        _run(repo, "dvc", "queue", "kill", "killed")
        assert _queue_status(repo)[0]["killed"] == "Failed"
        log = _run(repo, "dvc", "queue", "logs", "killed")
        assert "Running stage 'train'" in log and "permanent checkpoint at step 2" in log, log[-3000:]
        assert _metrics(_shown(repo)["killed"]) == {}

        # queued again, it runs to its end: every step once, the killed run's records byte for byte
        _run(repo, "dvc", "exp", "run", "--queue", "-n", "rerun", "-S", f"trainer.max_steps={STEPS}")
        _start_queue(repo)
        _wait_for(repo, "rerun", "Success")
        shown = _shown(repo)
        assert _metrics(shown["rerun"])["metrics/train.json"]["step"] == STEPS
        assert _metrics(shown["killed"]) == {}
        assert _run(repo, "dvc", "exp", "list", "--name-only").split() == ["rerun"]
        runs = f"cache/artifacts/runs/{RUN}"
        rows = [json.loads(line) for line in dvc.api.read(f"{runs}/metrics.jsonl", repo=str(repo), rev="rerun").splitlines()]
        assert [row["step"] for row in rows] == list(range(1, STEPS + 1))
        for step, records in half_records.items():
            assert dvc.api.read(f"{runs}/generations/step-{step:05d}.jsonl", repo=str(repo), rev="rerun", mode="rb") == records, step
        assert _tracked(repo) == before
        assert not _run(repo, "git", "status", "--porcelain")
    finally:  # never leave a detached worker behind
        _kill_queue_processes(repo)
