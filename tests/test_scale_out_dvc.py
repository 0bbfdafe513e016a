"""Scale-out through DVC (docs/scale-out.md) on the seconds-scale project, in a temporary Git
repository built as tests/test_pipeline.py builds it: a local-directory remote (`dvc push`, then a
fresh clone's `dvc pull` + `dvc repro` reruns nothing and restores every cached output byte for
byte) and queued experiments (`dvc exp run --queue` + `dvc queue start -j 2`: each runs in a
temporary workspace under .dvc/tmp/exps and logs into the repository's one MLflow store, which
two processes may create at once; or, with MLFLOW_TRACKING_URI naming a server started by
scripts/mlflow-server.sh, into that server, as the workers inherit the environment of `dvc queue start`).

Slow (`make test-slow`): one `dvc repro` shared by the tests, then two experiments side by side per
store (the server variant skips where PostgreSQL cannot be installed or started, as
tests/test_mlflow_server.py does). Each test prints its timings (`pytest -s`)."""

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
from hackable_rl.core.storage import file_sha256
from mlflow_server_fixture import server_fixture  # noqa: F401 (the `server` fixture)
from test_pipeline import BIN, REPO, _make_repo, _run

pytestmark = pytest.mark.slow

VENV = BIN.parent
DVC = str(BIN / "dvc")  # for the calls that must not assert (diagnostics, cleanup)
RATES = (0.0, 0.4)
QUEUE_TIMEOUT_S = 900
# Workers take a few seconds to come up; none alive after this long with a task still queued is a hang.
# A running task is not: a worker that takes a stale shutdown (a pidbox message left for its name by the
# previous queue's workers, which carry the same names) drains its task without answering `dvc queue
# status`, which then counts 0 workers while the experiment runs on to Success (seen on 2 cores: 107 s).
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
    assert {"cache/models/tiny-arith-w0", "cache/artifacts/eval/trained"} <= set(outs)
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
    for out in ("cache/models/tiny-arith-w0/model.safetensors", "cache/artifacts/eval/trained/s0/generations.jsonl"):
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
        unstarted = "Queued" in states.values()
        if waited > QUEUE_TIMEOUT_S or (workers == 0 and unstarted and waited > WORKER_GRACE_S):
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


def _run_tracked(command: list[str], cwd: Path, uri: str | None) -> str:
    """`_run` (which unsets MLFLOW_TRACKING_URI), or with MLFLOW_TRACKING_URI=uri when given, as a
    shell after `eval "$(scripts/mlflow-server.sh start)"` runs it."""
    if uri is None:
        return _run(command, cwd)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": uri}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _start_queue(repo: Path, uri: str | None) -> None:
    """`dvc queue start -j 2`, its console to a file rather than a pipe: the Celery workers it detaches
    inherit its output, and a worker that misses its shutdown (its monitor can stop "due to empty queue"
    while a task still runs) would hold a captured pipe open, so waiting on the pipe could hang."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if uri is not None:
        env["MLFLOW_TRACKING_URI"] = uri
    with (repo / ".dvc" / "tmp" / "queue-start.log").open("w") as log:
        code = subprocess.run(["dvc", "queue", "start", "-j", "2"], cwd=repo, env=env, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=900).returncode
    assert code == 0, (repo / ".dvc" / "tmp" / "queue-start.log").read_text()[-3000:]


def _wait_for_no_workers(repo: Path) -> None:
    """Until the workers of an earlier test have gone: a live one would take this test's tasks, in
    its own environment (another MLFLOW_TRACKING_URI), and `dvc queue start` would start none."""
    deadline = time.monotonic() + WORKER_GRACE_S
    while _queue_status(repo)[1]:
        assert time.monotonic() < deadline, f"workers still alive:\n{_queue_diagnostics(repo, [])}"
        time.sleep(1)


def _runs_of(client: MlflowClient, name: str) -> list:
    experiment = client.get_experiment_by_name("tests")
    return client.search_runs([experiment.experiment_id], f"tags.dvc_experiment = '{name}'") if experiment else []


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_queued_experiments_run_in_temporary_workspaces_into_one_mlflow_store(ran_repo, store, request, monkeypatch):
    """`store`: the repository's embedded SQLite store (MLFLOW_TRACKING_URI unset), or a tracking
    server (scripts/mlflow-server.sh) named by MLFLOW_TRACKING_URI in the environment of `dvc queue
    start`, which the workers inherit."""
    server = request.getfixturevalue("server") if store == "server" else None  # skips without PostgreSQL
    uri = server.uri if server else None
    # No MLflow store yet, as in a fresh clone after `dvc pull` (DVC does not carry it): both workers'
    # first stage (evaluate_base) then creates it at once, which crashed one of them before
    # tracking/store.py's store_creation_lock. (A server starts empty: its experiment too is created at once.)
    shutil.rmtree(ran_repo / "cache/mlflow", ignore_errors=True)  # absent where the server variant ran first
    _wait_for_no_workers(ran_repo)
    earlier, _ = _queue_status(ran_repo)  # the other store's tasks, when it ran first (listed as done)
    rate_grid = ",".join(map(str, RATES))
    _run_tracked(["dvc", "exp", "run", "--queue", "-S", f"corruption.rate={rate_grid}"], ran_repo, uri)  # a 2-point grid
    listed_tasks, _ = _queue_status(ran_repo)
    queued = {name: state for name, state in listed_tasks.items() if name not in earlier}
    assert list(queued.values()) == ["Queued", "Queued"], listed_tasks
    try:
        with _timed(f"two queued experiments, {store} store (dvc queue start -j 2 until both finished)"):
            _start_queue(ran_repo, uri)
            states = _wait_for_queue(ran_repo, queued)
    finally:  # never leave detached Celery workers behind
        subprocess.run([DVC, "queue", "stop", "--kill"], cwd=ran_repo, capture_output=True)
    diagnostics = _queue_diagnostics(ran_repo, queued)
    states = {name: states.get(name) for name in queued}
    assert states == dict.fromkeys(queued, "Success"), diagnostics
    assert "database is locked" not in diagnostics  # both workers share the embedded SQLite store
    if uri is not None:
        for warning in ("continuing offline", "logging locally only"):  # the tracker's two warnings
            assert warning not in diagnostics, diagnostics

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

    store_db = ran_repo.resolve() / "cache/mlflow/mlflow.db"
    expected_uri = uri or f"sqlite:///{store_db}"
    artifacts_of = {}  # (experiment, MLflow run id) -> run.json's checkpoint artifacts
    for name, rate in rates.items():
        for seed in (0, 1, 2):  # the three replicates
            # The run folder, read back from the experiment's commit: the queued stage found the model in
            # its own temporary workspace, and logged into the store of the workers' environment (the
            # real repository's SQLite store, or the server), nothing pending.
            run = json.loads(dvc.api.read(f"cache/artifacts/runs/baseline-flip-r{rate:g}-s{seed}/run.json",
                                          repo=str(ran_repo), rev=name))
            assert run["base_model"].startswith(f"tiny:{ran_repo.resolve()}/.dvc/tmp/exps/tmp"), run["base_model"]
            assert run["tracking_uri"] == expected_uri and not run["tracking_pending"], run
            artifacts_of[name, run["mlflow_run_id"]] = run["checkpoint_artifacts"]

    client = MlflowClient(expected_uri)
    for name, rate in rates.items():
        runs = _runs_of(client, name)
        kinds = sorted((run.data.tags["hackable_rl.kind"], run.info.status) for run in runs)
        assert kinds == [("eval", "FINISHED")] * 3 + [("train", "FINISHED")] * 3, (name, kinds)  # three replicates
        assert all("Headline/eval_pass_at_1" in run.data.metrics for run in runs), name  # the base eval's, the trained ones'
        trained = [run for run in runs if run.data.tags["hackable_rl.kind"] == "train"]
        assert {run.data.tags["corruption.rate"] for run in trained} == {str(rate)}
        assert {run.info.run_id for run in trained} == {run_id for exp, run_id in artifacts_of if exp == name}
        model = "tests-policy-" + ("clean" if rate == 0 else "corrupted")
        for run in trained:
            assert "judge/correctness" in run.data.metrics, (name, sorted(run.data.metrics))
            # the loss is a chart, or a tag where it stayed flat (training/constant_series.py)
            assert "trl/loss" in run.data.metrics or "constant.trl/loss" in run.data.tags, name
            # every permanent checkpoint (trainer.permanent_steps [1], and the last) in the run's artifacts;
            # one Model Registry version: the checkpoint the pipeline evaluated (the last)
            logged = {str(step): f"checkpoints/permanent/step-{step}" for step in (1, 2)}
            assert artifacts_of[name, run.info.run_id] == logged, name
            versions = client.search_model_versions(f"run_id = '{run.info.run_id}'")
            assert {v.name for v in versions} == {model}, (name, versions)
            assert [(v.tags["step"], "independent_eval" in v.tags) for v in versions] == [("2", True)], (name, versions)
            if server is not None:  # the checkpoints went through the server into its --artifacts-destination
                uploaded = (server.state / "artifacts").rglob(f"{run.info.run_id}/**/step-2/model.safetensors")
                assert len(list(uploaded)) == 1, (name, run.info.run_id)

    if uri is not None:  # nothing went to a local store on the way
        if store_db.exists():
            local = MlflowClient(f"sqlite:///{store_db}")
            assert not any(_runs_of(local, name) for name in rates), "runs in the local SQLite store"
        assert not (ran_repo / "mlflow.db").exists() and not (ran_repo / "mlruns").exists()


def test_two_processes_creating_one_sqlite_store_at_once_both_succeed(tmp_path):
    # What two queue workers (or `seeds`) do first on a fresh clone. Without the creation lock,
    # MLflow's schema migrations race and one process crashes ("duplicate column name: step",
    # "table _alembic_tmp_experiments already exists"): three times in three tries on 2 cores.
    code = "import sys; from hackable_rl.tracking.opening import make_client; make_client(sys.argv[1])[0].search_experiments()"
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    processes = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cache")], cwd=tmp_path, env=env,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [process.communicate(timeout=300)[1][-2000:] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], errors
