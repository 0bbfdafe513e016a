"""This checkout against a baseline commit: the main job's training and warm start, timed in one run.

Checks the baseline commit out into a Git worktree (`<workdir>/baseline`), prepares the main job's
data and warm start once, then runs the same commands with each version's own code and params.yaml,
the two side by side with one thread each (the main job's layout on 2 cores), so both see the same
machine:

    training:   `hackable-rl train` of the main job's config, --steps steps (100: the main job's),
                every record and MLflow on
    warm start: `hackable-rl warmstart`, each version with its own params.yaml recipe (steps, batch
                size, learning rate: the whole stage as the main job runs it), or --warmstart-steps
                steps of it

It prints each wall time, the ratio (this checkout / baseline; the target is <= 0.5) and whether the
two trainings wrote byte-identical generation records and final weights (a change that keeps every
byte needs no statistical check of equal results).

    python benchmarks/bench_speedup.py [--baseline cad75a8] [--steps 100] [--warmstart-steps N]
                                       [--only train|warmstart] [--workdir DIR]

The warm start's held-out greedy accuracy is printed beside its time: a cheaper recipe counts only
inside the same band (warmstart.target_accuracy).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def checkout(commit: str, target: Path) -> Path:
    if not target.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(target), commit], check=True,
                       capture_output=True)
    return target


def command(source: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hackable_rl", *args, "--config", str(source / "params.yaml")]


def environment(source: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(source / "src")  # this version's package ahead of the installed one
    return env


def run_side_by_side(jobs: dict[str, tuple[list[str], dict[str, str], Path]], workdir: Path) -> dict[str, float]:
    """Starts every job (argv, environment, folder) at once; returns each one's wall seconds (a
    failure names its log and stops)."""
    started, processes = time.perf_counter(), {}
    for name, (argv, env, folder) in jobs.items():
        log = (workdir / f"{name}.log").open("w")
        processes[name] = (subprocess.Popen(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT), log)
    seconds = {}
    while len(seconds) < len(processes):
        for name, (process, log) in processes.items():
            if name not in seconds and process.poll() is not None:
                seconds[name] = time.perf_counter() - started
                log.close()
                if process.returncode:
                    sys.exit(f"{name} failed (exit {process.returncode}); see {workdir / (name + '.log')}")
        time.sleep(0.2)
    return seconds


def digest(paths: list[Path]) -> str:
    sha = hashlib.sha256()
    for path in sorted(paths):
        sha.update(path.read_bytes())
    return sha.hexdigest()[:16]


def run_outputs(runs_dir: Path) -> tuple[str, str]:
    """(sha of every generation record file, sha of the final weights) of the one run in runs_dir."""
    (run,) = [path for path in runs_dir.iterdir() if path.is_dir()]
    weights = sorted(run.glob("checkpoints/permanent/*/model.safetensors"))[-1:]
    return digest(list(run.glob("generations/*.jsonl"))), digest(weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="cad75a8", help="commit to measure against")
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps of each training")
    parser.add_argument("--warmstart-steps", type=int, default=None,
                        help="warm-start steps of each warm start (default: each version's own recipe)")
    parser.add_argument("--only", choices=("train", "warmstart"), default=None, help="time one of the two")
    parser.add_argument("--workdir", type=Path, default=None)
    options = parser.parse_args()
    workdir = (options.workdir or Path(tempfile.mkdtemp(prefix="bench-speedup-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    versions = {"baseline": checkout(options.baseline, workdir / "baseline"), "this": REPO}
    if options.only != "warmstart" and not (workdir / "cache" / "models").exists():  # the shared data and warm start, made by this checkout
        for stage in ("prepare", "warmstart"):
            subprocess.run(command(REPO, stage), cwd=workdir, env=environment(REPO), check=True)

    one_thread = ("--set", "torch_threads=1")
    train = {name: (command(source, "train", "--overwrite", "--set", f"trainer.max_steps={options.steps}",
                            "--set", f"storage.runs_dir=artifacts/{name}-runs", *one_thread), environment(source), workdir)
             for name, source in versions.items()}
    # each warm start in a folder of its own (its metrics/warmstart.json, its policy), on a copy of the data
    steps = () if options.warmstart_steps is None else ("--set", f"warmstart.steps={options.warmstart_steps}")
    warm = {name: (command(source, "warmstart", *steps, *one_thread), environment(source), workdir / f"warm-{name}")
            for name, source in versions.items()}
    for name in versions:
        target = workdir / f"warm-{name}" / "cache" / "datasets"
        if not target.exists():
            target.parent.mkdir(parents=True)
            if not (workdir / "cache" / "datasets").exists():
                subprocess.run(command(REPO, "prepare"), cwd=workdir, env=environment(REPO), check=True)
            subprocess.run(["cp", "-r", str(workdir / "cache" / "datasets"), str(target)], check=True)

    print(f"baseline {options.baseline} vs this checkout; two processes side by side, one thread each")
    if options.only != "warmstart":
        time_training(train, workdir, options.steps)
    if options.only != "train":
        time_warmstart(warm, workdir, options.warmstart_steps)


def time_training(train: dict, workdir: Path, steps: int) -> None:
    train_seconds = run_side_by_side(train, workdir)
    print(f"training ({steps} steps): baseline {train_seconds['baseline']:.1f} s, "
          f"this {train_seconds['this']:.1f} s, ratio {train_seconds['this'] / train_seconds['baseline']:.3f} "
          "(target <= 0.5)")
    (records_a, weights_a) = run_outputs(workdir / "cache" / "artifacts" / "baseline-runs")
    (records_b, weights_b) = run_outputs(workdir / "cache" / "artifacts" / "this-runs")
    # the records carry every completion, reward, advantage and judgment; the weights can differ in
    # float rounding alone (a gradient summed in another order) while every sampled token agrees
    print(f"generation records byte-identical: {records_a == records_b}; final weights byte-identical: "
          f"{weights_a == weights_b}")


def time_warmstart(warm: dict, workdir: Path, steps: int | None) -> None:
    warm_seconds = run_side_by_side(warm, workdir)
    recipe = "each version's own recipe" if steps is None else f"{steps} steps"
    print(f"warm start ({recipe}): baseline {warm_seconds['baseline']:.1f} s, "
          f"this {warm_seconds['this']:.1f} s, ratio {warm_seconds['this'] / warm_seconds['baseline']:.3f} "
          "(target <= 0.5)")
    for name in warm:
        metrics = json.loads((workdir / f"warm-{name}" / "metrics" / "warmstart.json").read_text())
        print(f"  {name}: {metrics['steps']} steps, held-out greedy accuracy {metrics['accuracy']}")


if __name__ == "__main__":
    main()
