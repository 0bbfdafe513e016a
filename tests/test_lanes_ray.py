"""`hackable-rl lanes`: a study's cells as Ray tasks, recorded in dvc.lock as `dvc repro` would.

- On a local Ray (no --address): cheap Python stages; each that exits 0 is committed, a stage that
  fails deterministically fails once (its log holds one attempt) and names its log, the others finish,
  and `dvc status` is clean for every stage that ran.
- On a real Ray head (`ray start --head --num-cpus 2` on 127.0.0.1, the dashboard on): the plugin study
  of tests/test_plugin_study.py as DVC stages (one `hackable-rl condition` per cell, then `report`); the
  worker running one trained cell is killed mid-cell (its PID from the cell's PID file). Ray retries the
  task, the cell resumes from its last checkpoint, every cell finishes, every training step appears once
  in the run's records and in MLflow, dvc.lock holds every cell, and `dvc repro` afterwards reruns nothing.
- The same study through lanes and through plain `dvc repro`: byte-identical outcomes.json.

Slow (`make test-slow`), and skipped without the `ray` extra.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import yaml

from mlflow_server_fixture import _free_port
from test_multiprocess_training import _client, _records_by_step
from test_plugin_study import CONDITIONS, PLUGINS, STUDY

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SRC = Path(__file__).resolve().parents[1] / "src"
KILLED = ("baseline", "k3")  # the cell whose worker is killed: a trained one
STEPS = 8  # save_steps 2: the kill lands between resumable checkpoints, with steps left to resume


def _env() -> dict[str, str]:
    """The workers' environment (a `ray start` passes its own on to them): this checkout's code,
    the study's plugin, one thread each, the embedded MLflow store."""
    env = os.environ | {"PATH": f"{BIN}:{os.environ['PATH']}", "PYTHONPATH": f"{SRC}:{PLUGINS}",
                        "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "RAY_USAGE_STATS_ENABLED": "0"}
    for name in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
        env.pop(name, None)
    return env


_TOKEN = uuid.uuid4().hex  # this module's cluster's own: ~/.ray/auth_token may not exist, and is not the tests' to write


def _head_env() -> dict[str, str]:
    """`ray start` turns on Ray's token authentication (Ray 2.60) and refuses to start without a
    token; the head, its workers and its clients read this one from the environment."""
    return _env() | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": _TOKEN}


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def _dvc_project(folder: Path, stages: dict) -> None:
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    _run([str(BIN / "dvc"), "init", "--no-scm", "-q"], folder)


# --------------------------------------------------------------------------- a local Ray


def test_lanes_on_a_local_ray_commits_each_cell_and_fails_a_broken_one_once(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    write = "import sys; open(sys.argv[1], 'w').write(open('a.txt').read())"
    _dvc_project(tmp_path, {
        "first": {"cmd": "python -c \"open('a.txt', 'w').write('a')\"", "outs": ["a.txt"]},
        "cell": {"matrix": {"n": [1, 2, 3]}, "deps": ["a.txt"], "outs": ["c${item.n}.txt"],
                 "cmd": f"python -c \"{write}\" c${{item.n}}.txt"},
        "broken": {"deps": ["a.txt"], "outs": ["b.txt"],
                   "cmd": "python -c \"print('attempt'); raise SystemExit(3)\""},
    })
    lanes = [sys.executable, "-m", "hackable_rl", "lanes"]
    first = subprocess.run([*lanes, "cell@*"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert first.returncode == 2 and "run `dvc repro first` first" in first.stderr + first.stdout
    assert "first: ok" in _run([*lanes, "first"], tmp_path)

    result = subprocess.run([*lanes, "cell@*", "broken"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                            timeout=300)
    log = tmp_path / "cache/logs/lanes/broken.log"
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"a local Ray instance, {os.cpu_count()} CPUs" in result.stdout
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("cell@")) == \
        ["cell@1: ok", "cell@2: ok", "cell@3: ok"]
    assert f"broken: FAILED (exit 3), log {log}" in result.stdout
    assert log.read_text().count("attempt") == 1  # a non-zero exit is not retried
    status = _run([str(BIN / "dvc"), "status"], tmp_path)
    assert "cell@" not in status and "broken" in status  # every cell that ran recorded, the broken one not
    assert "every stage matching cell@* is up to date" in _run([*lanes, "cell@*"], tmp_path)


# --------------------------------------------------------------------------- a Ray head, the study


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """`ray start --head --block` on 127.0.0.1 with 2 CPUs; every process it started is ended after."""
    pytest.importorskip("ray")
    import psutil

    port, temp = _free_port(), tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths
    log = (tmp_path_factory.mktemp("ray-head") / "head.log").open("w")
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--num-cpus", "2", "--num-gpus", "0",
         "--node-ip-address", "127.0.0.1", "--port", str(port), "--temp-dir", temp,
         "--dashboard-host", "127.0.0.1", "--dashboard-port", str(_free_port()), "--disable-usage-stats"],
        env=_head_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_head(head, address, log.name)
        yield address
    finally:  # SIGTERM to `ray start --block` stops what it started; what is left after 30 s is killed
        processes = []
        with contextlib.suppress(psutil.NoSuchProcess):  # a head that failed to start has nothing left
            processes = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
        head.terminate()
        _, alive = psutil.wait_procs(processes, timeout=30)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_head(head: subprocess.Popen, address: str, log: str) -> None:
    deadline = time.time() + 120
    while subprocess.run([str(BIN / "ray"), "status", "--address", address], env=_head_env(),
                         capture_output=True).returncode != 0:
        assert head.poll() is None and time.time() < deadline, Path(log).read_text()[-3000:]
        time.sleep(1)


def _study_project(folder: Path, write_params, settings: dict) -> Path:
    """The plugin study as DVC stages: one condition per (method, cell), then the report."""
    write_params(folder, {"objective.rewards": ["correctness_reward"], "report.outcomes": "outcomes.json",
                          "torch_threads": 1, "trainer.save_steps": 2, **settings})
    (folder / "study.yaml").write_text(STUDY)
    cells = {f"{method}-{cell}": {"method": method, "cell": cell} for method, cell in CONDITIONS}
    out = "results/${item.cell}/${item.method}-s0"
    _dvc_project(folder, {
        "condition": {"foreach": cells, "do": {
            "cmd": f"hackable-rl condition --method ${{item.method}} --study study.yaml --cell ${{item.cell}} --out {out}",
            "params": [{"params.yaml": None}], "outs": [{out: {"cache": False}}]}},
        "report": {"cmd": "hackable-rl report --study results --out reports", "deps": ["results"],
                   "params": ["report"], "outs": [{"reports": {"cache": False}}, {"outcomes.json": {"cache": False}}]},
    })
    return folder


def _kill_the_worker_mid_cell(project: Path, lanes: subprocess.Popen) -> int:
    """Waits for the cell's first resumable checkpoint, then SIGKILLs the Ray worker running it."""
    method, cell = KILLED
    run_dir = project / f"cache/artifacts/runs/{method}-{cell}-s0"
    checkpoint = run_dir / "checkpoints/resume/checkpoint-2/trainer_state.json"
    deadline = time.time() + 600
    while not checkpoint.exists():
        assert lanes.poll() is None and time.time() < deadline, "lanes ended before the cell could be killed"
        time.sleep(0.05)
    assert not (run_dir / f"generations/step-{STEPS:05d}.jsonl").exists(), "the cell ended before the kill"
    worker = int((project / f"cache/logs/lanes/condition@{method}-{cell}.pid").read_text().split()[1])
    os.kill(worker, signal.SIGKILL)
    return worker


def test_a_study_on_a_ray_head_survives_a_killed_worker(ray_head, project: Path, tiny_params_writer) -> None:
    _study_project(project, tiny_params_writer, {"trainer.max_steps": STEPS, "trainer.permanent_steps": [STEPS]})
    started = time.time()
    lanes = subprocess.Popen([sys.executable, "-m", "hackable_rl", "lanes", "condition@*", "--address", ray_head],
                             cwd=project, env=_head_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = _kill_the_worker_mid_cell(project, lanes)
    output, _ = lanes.communicate(timeout=900)
    print(f"lanes over {len(CONDITIONS)} cells with one worker killed: {time.time() - started:.0f} s")
    assert lanes.returncode == 0, output[-3000:]
    assert sorted(line for line in output.splitlines() if line.startswith("condition@")) == \
        sorted(f"condition@{method}-{cell}: ok" for method, cell in CONDITIONS)

    method, cell = KILLED
    log = (project / f"cache/logs/lanes/condition@{method}-{cell}.log").read_text()
    assert "retried after its worker died" in log and f"resuming {method}-{cell}-s0 from step" in log
    assert int((project / f"cache/logs/lanes/condition@{method}-{cell}.pid").read_text().split()[1]) != killed
    for method, cell in CONDITIONS:
        record = json.loads((project / f"results/{cell}/{method}-s0/condition.json").read_text())
        assert record["status"] == "ok", record.get("error")
    _assert_every_step_once(project, project / f"cache/artifacts/runs/{KILLED[0]}-{KILLED[1]}-s0")

    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert sorted(lock) == sorted(f"condition@{method}-{cell}" for method, cell in CONDITIONS)
    repro = _run([str(BIN / "dvc"), "repro"], project)
    assert "Running stage 'condition@" not in repro and "Running stage 'report'" in repro, repro[-3000:]
    assert "Running stage" not in _run([str(BIN / "dvc"), "repro"], project)  # every stage recorded


def _assert_every_step_once(project: Path, run_dir: Path) -> None:
    """The killed cell's run: one run folder and one MLflow run, every step's records, metrics and
    MLflow step metrics once."""
    assert sorted(_records_by_step(run_dir)) == list(range(1, STEPS + 1))
    metric_steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metric_steps == list(range(1, STEPS + 1))
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["final_step"] == STEPS
    client = _client(project)
    runs = client.search_runs([client.get_experiment_by_name("tests").experiment_id],
                              filter_string=f"tags.mlflow.runName = '{run_dir.name}' and tags.`hackable_rl.kind` = 'train'")
    assert [run.info.run_id for run in runs] == [info["mlflow_run_id"]] and runs[0].info.status == "FINISHED"
    history = [m.step for m in client.get_metric_history(info["mlflow_run_id"], "judge/correctness")]
    assert sorted(history) == list(range(1, STEPS + 1))


def test_lanes_and_dvc_repro_give_the_same_outcomes(ray_head, project: Path, tiny_project: Path,
                                                     tiny_params_writer) -> None:
    seconds_scale = {"trainer.max_steps": 2, "trainer.permanent_steps": [2], "tracking.enabled": False}
    through_ray = _study_project(project, tiny_params_writer, seconds_scale)
    through_dvc = _study_project(shutil.copytree(tiny_project, project.parent / "dvc"), tiny_params_writer,
                                 seconds_scale)
    started = time.time()
    _run([sys.executable, "-m", "hackable_rl", "lanes", "condition@*", "--address", ray_head], through_ray, _head_env())
    repro = _run([str(BIN / "dvc"), "repro"], through_ray)
    assert "Running stage 'condition@" not in repro and "Running stage 'report'" in repro, repro[-3000:]
    print(f"lanes + report: {time.time() - started:.0f} s")
    started = time.time()
    _run([str(BIN / "dvc"), "repro"], through_dvc)
    print(f"dvc repro: {time.time() - started:.0f} s")
    assert (through_ray / "outcomes.json").read_bytes() == (through_dvc / "outcomes.json").read_bytes()
    assert json.loads((through_ray / "outcomes.json").read_text())  # the study has outcomes to compare
