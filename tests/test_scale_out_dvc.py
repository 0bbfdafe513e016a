"""Scale-out through DVC (docs/scale-out.md) on the seconds-scale project, in a temporary Git
repository built as tests/test_pipeline.py builds it: a local-directory remote (`dvc push`, then a
fresh clone's `dvc pull` + `dvc repro` reruns nothing and restores every cached output byte for
byte) and queued experiments (`dvc exp run --queue` + `dvc queue start -j 2`: each runs in a
temporary workspace under .dvc/tmp/exps and logs into the repository's one MLflow store, which
two processes may create at once).

Slow (`make test-slow`): one `dvc repro` shared by both tests, then two experiments side by side.
Each test prints its timings (`pytest -s`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import dvc.api
import pytest
import yaml
from mlflow import MlflowClient

from conftest import write_params
from hackable_rl.storage import file_sha256
from test_pipeline import BIN, REPO, _make_repo, _run

pytestmark = pytest.mark.slow

VENV = BIN.parent
DVC = str(BIN / "dvc")  # for the calls that must not assert (diagnostics, cleanup)
RATES = (0.0, 0.4)
QUEUE_TIMEOUT_S = 900
# Workers take a few seconds to come up; none alive after this long with work still queued is a hang.
WORKER_GRACE_S = 90
POLL_S = 5


@contextmanager
def _timed(what: str):
    start = time.perf_counter()
    yield
    print(f"\ntiming: {what}: {time.perf_counter() - start:.1f} s")


def _one_thread_params(folder: Path, overrides: dict) -> Path:
    # Two queue workers on 2 cores: one torch thread per process, or they fight over the cores.
    return write_params(folder, {**overrides, "torch_threads": 1})


def _commit(repo: Path, message: str) -> None:
    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-qm", message], repo)


@pytest.fixture(scope="module")
def ran_repo(tmp_path_factory) -> Path:
    """The seconds-scale project after `dvc repro`, dvc.lock and metrics committed: the baseline both
    tests start from (the remote's push and the queue's skipped stages need it)."""
    repo = _make_repo(tmp_path_factory.mktemp("scale-out") / "repo", _one_thread_params)
    with _timed("dvc repro of the seconds-scale project (shared fixture)"):
        _run(["dvc", "repro"], repo)
    _commit(repo, "baseline")
    return repo


def _stages(repo: Path) -> list[str]:
    return list(yaml.safe_load((repo / "dvc.yaml").read_text())["stages"])


def _cached_outs(repo: Path) -> list[str]:
    """The outputs DVC caches (so pushes): a plain string in `outs:`; `cache: false` ones live in Git."""
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"].values()
    return [out for stage in stages for out in stage.get("outs", []) if isinstance(out, str)]


def _file_hashes(root: Path, outs: list[str]) -> dict[str, str]:
    files = (path for out in outs for path in sorted((root / out).rglob("*")) if path.is_file())
    return {str(path.relative_to(root)): file_sha256(path) for path in files}


def test_push_then_pull_in_a_fresh_clone_reruns_nothing(ran_repo, tmp_path):
    _run(["dvc", "remote", "add", "-d", "storage", str(tmp_path / "remote")], ran_repo)
    _commit(ran_repo, "a local-directory DVC remote")  # the clone finds the remote in .dvc/config
    with _timed("dvc push"):
        _run(["dvc", "push"], ran_repo)

    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(ran_repo), str(clone)], tmp_path)
    outs = _cached_outs(clone)
    assert {"cache/models/tiny-arith", "cache/artifacts/eval/trained"} <= set(outs)
    assert not any((clone / out).exists() for out in outs)  # Git carried none of them
    with _timed("dvc pull"):
        _run(["dvc", "pull"], clone)

    assert "Data and pipelines are up to date." in _run(["dvc", "status"], clone)
    output = _run(["dvc", "repro"], clone)
    assert "Running stage" not in output, output
    for stage in _stages(clone):
        assert f"Stage '{stage}' didn't change, skipping" in output, stage
    assert not _run(["git", "status", "--porcelain"], clone)  # dvc.lock untouched
    restored, original = _file_hashes(clone, outs), _file_hashes(ran_repo, outs)
    assert restored == original
    for out in ("cache/models/tiny-arith/model.safetensors", "cache/artifacts/eval/trained/s0/generations.jsonl"):
        assert out in restored, out


def _queue_status(repo: Path) -> tuple[dict[str, str], int]:
    """Each task's state by experiment name (`dvc queue status`), and how many workers are alive."""
    output = _run(["dvc", "queue", "status"], repo)
    states = {}
    for line in output.splitlines()[1:]:  # rows: task, name, created (may hold a space), status
        parts = line.split()
        if len(parts) >= 4 and not line.startswith("Worker status"):
            states[parts[1]] = parts[-1]
    workers = re.search(r"Worker status: (\d+) active, (\d+) idle", output)
    return states, sum(map(int, workers.groups())) if workers else 0


def _queue_diagnostics(repo: Path, names) -> str:
    """What to read when the queue fails or hangs: each task's log and each Celery worker's own log."""
    parts = [subprocess.run([DVC, "queue", "status"], cwd=repo, capture_output=True, text=True).stdout]
    for name in names:
        log = subprocess.run([DVC, "queue", "logs", name], cwd=repo, capture_output=True, text=True)
        parts.append(f"--- dvc queue logs {name}\n{(log.stdout + log.stderr)[-3000:]}")
    for worker_log in sorted((repo / ".dvc/tmp/exps/celery").glob("*.out")):
        parts.append(f"--- {worker_log.name}\n{worker_log.read_text()[-2000:]}")
    return "\n".join(parts)


def _wait_for_queue(repo: Path, names) -> dict[str, str]:
    """The final states once no task is queued or running; fails with the logs on a hang."""
    start = time.monotonic()
    while True:
        states, workers = _queue_status(repo)
        if states and not {"Queued", "Running"} & set(states.values()):
            return states
        waited = time.monotonic() - start
        if waited > QUEUE_TIMEOUT_S or (workers == 0 and waited > WORKER_GRACE_S):
            pytest.fail(f"dvc queue stuck after {waited:.0f} s ({workers} workers alive, {states}):\n"
                        f"{_queue_diagnostics(repo, names)}")
        time.sleep(POLL_S)


def _experiments(repo: Path) -> dict[str, dict]:
    """Each experiment's `dvc exp show --json` data by name (the workspace and baselines left out)."""
    shown = json.loads(_run(["dvc", "exp", "show", "--json"], repo))
    return {rev["name"]: rev for row in shown for exp in row.get("experiments") or [] for rev in exp["revs"]}


def _make_results(repo: Path) -> str:
    # The Makefile's own `results` recipe, run in the temporary repository with this virtualenv; -o
    # keeps make from reinstalling it (its stamp would be older than a copied pyproject.toml).
    return _run(["make", "--no-print-directory", "-f", str(REPO / "Makefile"), "-o",
                 str(VENV / ".installed-dev"), f"VENV={VENV}", "EXTRAS=dev", "results"], repo)


def test_queued_experiments_run_in_temporary_workspaces_into_one_mlflow_store(ran_repo, monkeypatch):
    # No MLflow store yet, as in a fresh clone after `dvc pull` (DVC does not carry it): both workers'
    # first stage (evaluate_base) then creates it at once, which crashed one of them before
    # tracking/store.py's store_creation_lock.
    shutil.rmtree(ran_repo / "cache/mlflow")
    rate_grid = ",".join(map(str, RATES))
    _run(["dvc", "exp", "run", "--queue", "-S", f"corruption.rate={rate_grid}"], ran_repo)  # a 2-point grid
    queued, _ = _queue_status(ran_repo)
    assert list(queued.values()) == ["Queued", "Queued"], queued
    try:
        with _timed("two queued experiments (dvc queue start -j 2 until both finished)"):
            _run(["dvc", "queue", "start", "-j", "2"], ran_repo)
            states = _wait_for_queue(ran_repo, queued)
    finally:  # never leave detached Celery workers behind
        subprocess.run([DVC, "queue", "stop", "--kill"], cwd=ran_repo, capture_output=True)
    diagnostics = _queue_diagnostics(ran_repo, queued)
    assert states == dict.fromkeys(queued, "Success"), diagnostics
    assert "database is locked" not in diagnostics  # both workers share the embedded SQLite store

    experiments = _experiments(ran_repo)
    rates = {name: experiments[name]["data"]["params"]["params.yaml"]["data"]["corruption"]["rate"] for name in queued}
    assert sorted(rates.values()) == list(RATES)
    for name, rate in rates.items():
        headline = experiments[name]["data"]["metrics"]["metrics/headline.json"]["data"]
        assert headline["condition"] == f"baseline-flip-r{rate:g}", name

    monkeypatch.setenv("COLUMNS", "200")  # rich drops columns at 80
    listed = _make_results(ran_repo)
    for name, rate in rates.items():
        assert re.search(rf"\[{name}\].*baseline-flip-r{rate:g}\s", listed), listed

    store = ran_repo.resolve() / "cache/mlflow/mlflow.db"
    for name, rate in rates.items():
        # The run folder, read back from the experiment's commit: the queued stage found the model in
        # its own temporary workspace, and logged into the real repository's store, nothing pending.
        run = json.loads(dvc.api.read(f"cache/artifacts/runs/baseline-flip-r{rate:g}-s0/run.json",
                                      repo=str(ran_repo), rev=name))
        assert run["base_model"].startswith(f"tiny:{ran_repo.resolve()}/.dvc/tmp/exps/tmp"), run["base_model"]
        assert run["tracking_uri"] == f"sqlite:///{store}" and not run["tracking_pending"], run

    client = MlflowClient(f"sqlite:///{store}")
    experiment_id = client.get_experiment_by_name("tests").experiment_id
    for name, rate in rates.items():
        runs = client.search_runs([experiment_id], f"tags.dvc_experiment = '{name}'")
        kinds = sorted((run.data.tags["hackable_rl.kind"], run.info.status) for run in runs)
        assert kinds == [("eval", "FINISHED"), ("train", "FINISHED"), ("train", "FINISHED")], (name, kinds)
        trained = [run for run in runs if run.data.tags["hackable_rl.kind"] == "train"]
        assert {run.data.tags["corruption.rate"] for run in trained} == {str(rate)}
        assert all("eval_pass_at_1" in run.data.metrics for run in trained), name


def test_two_processes_creating_one_sqlite_store_at_once_both_succeed(tmp_path):
    # What two queue workers (or `seeds`) do first on a fresh clone. Without the creation lock,
    # MLflow's schema migrations race and one process crashes ("duplicate column name: step",
    # "table _alembic_tmp_experiments already exists"): three times in three tries on 2 cores.
    code = "import sys; from hackable_rl.tracking.tracker import make_client; make_client(sys.argv[1])[0].search_experiments()"
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    processes = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cache")], cwd=tmp_path, env=env,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [process.communicate(timeout=300)[1][-2000:] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], errors
