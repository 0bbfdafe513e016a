"""Two training processes through accelerate's launcher on CPU (gloo): the run exists once.

`accelerate launch --multi_gpu --num_processes 2` starts them through torchrun; without a GPU the
project joins them over gloo (`training.ranks`). One MLflow run and one run folder; every rank's
generation records, each completion once; checkpoints written and logged to MLflow once, by the
main process; and after a kill -9 of the launcher (its workers die with it), `--resume auto`
continues the same run with no step duplicated or missing. Slow: about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STEPS, PER_DEVICE, GENERATIONS, PROCESSES = 10, 8, 4, 2
SETTINGS = [f"trainer.max_steps={STEPS}", "trainer.save_steps=2", "trainer.permanent_steps=[4]",
            f"trainer.per_device_train_batch_size={PER_DEVICE}", f"trainer.num_generations={GENERATIONS}",
            f"trainer.world_size={PROCESSES}", "torch_threads=1", "tracking.run_name=two-processes"]


def _launch(resume: bool = False) -> subprocess.Popen:
    accelerate = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    command = [accelerate, "launch", "--multi_gpu", "--num_processes", str(PROCESSES), "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
               shutil.which("hackable-rl") or str(Path(sys.executable).with_name("hackable-rl")),
               "train", "--config", "params.yaml", *(f"--set={s}" for s in SETTINGS)]
    if resume:
        command += ["--resume", "auto"]
    env = os.environ | {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-3000:]
    return output


def _client(project: Path):
    from mlflow import MlflowClient

    from hackable_rl.tracking.store import tracking_uri

    return MlflowClient(tracking_uri(str(project / "cache")))


def _records_by_step(run_dir: Path) -> dict[int, list[dict]]:
    return {int(path.stem.split("-")[1]): [json.loads(line) for line in path.read_text().splitlines()]
            for path in sorted((run_dir / "generations").glob("step-*.jsonl"))}


def _assert_one_run_of_every_step(project: Path, run_dir: Path) -> str:
    assert [p.name for p in (project / "cache" / "artifacts" / "runs").iterdir()] == ["two-processes"]
    records = _records_by_step(run_dir)
    assert sorted(records) == list(range(1, STEPS + 1))
    for step, rows in records.items():  # every rank's share of the step, each completion once
        assert len(rows) == PER_DEVICE * PROCESSES, step
        prompts = [row["prompt_id"] for row in rows]
        assert all(prompts.count(p) == GENERATIONS for p in prompts) and len(set(prompts)) == len(rows) // GENERATIONS
    metric_steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metric_steps == list(range(1, STEPS + 1))
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["final_step"] == STEPS
    client = _client(project)
    runs = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert [run.info.run_id for run in runs] == [info["mlflow_run_id"]] and runs[0].info.status == "FINISHED"
    history = [m.step for m in client.get_metric_history(info["mlflow_run_id"], "judge/correctness")]
    assert sorted(history) == list(range(1, STEPS + 1))  # logged once per step, by the main process
    assert sorted(p.name for p in (run_dir / "checkpoints" / "permanent").iterdir()) == ["step-10", "step-4"]
    # each permanent checkpoint logged once, by the main process; registered only once evaluated
    assert info["checkpoint_artifacts"] == {"4": "checkpoints/permanent/step-4", "10": "checkpoints/permanent/step-10"}
    assert client.search_model_versions(f"run_id = '{info['mlflow_run_id']}'") == []
    return info["mlflow_run_id"]


def test_two_processes_train_one_run(project: Path) -> None:
    started = time.time()
    output = _finish(_launch())
    assert output.count("run two-processes: 10 steps") == 1, output[-2000:]  # reported by the main process only
    _assert_one_run_of_every_step(project, project / "cache" / "artifacts" / "runs" / "two-processes")
    print(f"2 processes, {STEPS} steps: {time.time() - started:.0f} s")


def test_resume_after_kill_9_of_the_launcher_continues_the_same_run(project: Path) -> None:
    run_dir = project / "cache" / "artifacts" / "runs" / "two-processes"
    process = _launch()
    deadline = time.time() + 600
    while not (run_dir / "generations" / "step-00005.jsonl").exists():  # past the checkpoint at step 4
        assert process.poll() is None and time.time() < deadline, "training ended before it could be killed"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)  # the launcher alone: its workers must not train on without it
    process.wait()
    time.sleep(5)
    killed_at = sorted(p.name for p in (run_dir / "generations").glob("step-*.jsonl"))
    time.sleep(5)
    assert sorted(p.name for p in (run_dir / "generations").glob("step-*.jsonl")) == killed_at
    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    output = _finish(_launch(resume=True))
    assert "resuming two-processes from step" in output
    assert _assert_one_run_of_every_step(project, run_dir) == run_id
