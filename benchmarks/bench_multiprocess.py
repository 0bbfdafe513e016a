"""Wall time of the same GRPO work in one process and in two (`accelerate launch`, gloo on CPU).

The same global batch each step (per_device_train_batch_size x processes), the same steps, the
same warm-started policy and prompts: one process with `--threads` torch threads, then two
processes with half the threads each and half the per-device batch. Prints the seconds of each,
from the launch to the end (start-up included) and per step (the median of the steps after the
first), and the ratios against the one-process run. Run it on a quiet machine.

    .venv/bin/python benchmarks/bench_multiprocess.py --project pipelines/corruption_sweep --steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hackable_rl.config.loading import load_config

BIN = Path(sys.executable).parent


def _copy_project(project: Path, into: Path) -> None:
    """params.yaml and the prepared data and warm-started policy under cache/: nothing is recomputed."""
    shutil.copy(project / "params.yaml", into / "params.yaml")
    for part in ("datasets", "models"):
        shutil.copytree(project / "cache" / part, into / "cache" / part)


def _run(folder: Path, processes: int, batch: int, threads: int, steps: int) -> dict[str, float]:
    name = f"bench-{processes}-processes"
    settings = [f"trainer.max_steps={steps}", f"trainer.save_steps={steps}", "trainer.permanent_steps=[]",
                f"trainer.per_device_train_batch_size={batch}", f"trainer.world_size={processes}",
                f"torch_threads={threads}", f"tracking.run_name={name}", "tracking.enabled=false",
                "capability.enabled=false"]
    train = [str(BIN / "hackable-rl"), "train", "--config", "params.yaml", *(f"--set={s}" for s in settings)]
    launcher = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", str(processes), "--num_machines",
                "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"]
    command = [*launcher, *train] if processes > 1 else train
    started = time.time()
    subprocess.run(command, cwd=folder, check=True, env=os.environ | {"OMP_NUM_THREADS": str(threads)},
                   stdout=subprocess.DEVNULL)
    wall = time.time() - started
    rows = [json.loads(line) for line in (folder / "cache" / "artifacts" / "runs" / name / "metrics.jsonl").open()]
    seconds = [row["trl/step_time"] for row in rows[1:] if row.get("trl/step_time") is not None]
    return {"wall_s": wall, "step_s": statistics.median(seconds) if seconds else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path("pipelines/corruption_sweep"),
                        help="a folder with params.yaml and cache/datasets, cache/models (after its warm start)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the one process (the two get half)")
    args = parser.parse_args()
    batch = load_config(args.project / "params.yaml").trainer.per_device_train_batch_size
    with tempfile.TemporaryDirectory() as temp:
        results = {}
        for processes in (1, 2):
            folder = Path(temp) / f"p{processes}"
            folder.mkdir()
            _copy_project(args.project, folder)
            results[processes] = _run(folder, processes, batch // processes, max(1, args.threads // processes), args.steps)
    one, two = results[1], results[2]
    print(f"global batch {batch}, {args.steps} steps, {args.threads} cores' threads in all")
    print(f"1 process  x {args.threads} threads: {one['wall_s']:.1f} s wall, {one['step_s']:.2f} s/step")
    print(f"2 processes x {max(1, args.threads // 2)} thread(s): {two['wall_s']:.1f} s wall, {two['step_s']:.2f} s/step")
    print(f"ratio 2 / 1: wall {two['wall_s'] / one['wall_s']:.2f}, per step {two['step_s'] / one['step_s']:.2f}")


if __name__ == "__main__":
    main()
