"""What logging a step's completions as MLflow traces with assessments costs, as a share of a tiny-policy
GRPO step, measured in one process.

1. Baseline: a plain TRL GRPOTrainer on the warm-started tiny policy with hackable-rl's reward
   (`hackable_rl.trl_parts.verifier_reward`: the verifier, the judge and a generation record per
   completion) and no trace logging; the median wall time of a step (the first excluded) and each
   step's records (`reward.last_step_records()`).
2. The logging: those same records written to a fresh SQLite store as `tracking.traces.write_traces`
   writes them (the step's trace and one trace per completion, with the judge's verdict, the verifier's
   and each member's pay and the reference as assessments): one step a call, as the TRL callback sends
   them, and `--per-flush` steps a call, as `hackable-rl train` sends them at a checkpoint.

Prints each as milliseconds per step and as a share of the baseline's step (target: under 5%).
Timed in turn in one process, so a load on the machine weighs on both.

    python benchmarks/bench_assessments.py [--steps 12] [--per-flush 50] [--generations 8] [--workdir DIR]

`--workdir` holding prepared data and a warm start (cache/datasets/arith, cache/models/tiny-arith-w0, as
`dvc repro` or the tests' tiny project leave them) measures that policy; without one, a 60-step warm
start is made there first.
"""

# hackable_rl first: it pins PyTorch's CPU kernels before torch loads
from __future__ import annotations  # noqa: I001

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import hackable_rl  # noqa: F401
from bench_train_overhead import StepTimer  # a script beside this one: benchmarks/ is on the path

REPO = Path(__file__).resolve().parents[1]


class StepRecords(StepTimer):
    """Each step's wall time (bench_train_overhead's StepTimer) and its generation records' rows."""

    def __init__(self, reward):
        super().__init__()
        self.reward = reward
        self.rows: dict[int, list[dict]] = {}

    def on_step_end(self, args, state, control, **kwargs):
        super().on_step_end(args, state, control, **kwargs)
        self.rows[state.global_step] = [record.to_json() for record in self.reward.last_step_records()]


def _workdir_with_policy(workdir: Path) -> tuple[Path, Path]:
    """(warm-started model folder, training prompts), made in `workdir` when absent."""
    from hackable_rl.config.loading import load_config

    os.chdir(workdir)
    config = load_config(REPO / "params.yaml", ["warmstart.steps=60", "warmstart.eval_size=20", "tracking.enabled=false"])
    model = workdir / "cache" / "models" / f"tiny-{config.data.name}-w{config.seed}"
    if not model.exists():
        from hackable_rl.data.prepare import prepare_dataset
        from hackable_rl.warmstart import run_warmstart

        prepare_dataset(config)
        run_warmstart(config)
    return model, workdir / "cache" / "datasets" / config.data.name / "train.jsonl"


def baseline(model_dir: Path, data: Path, steps: int, generations: int, out: Path) -> StepRecords:
    """The tiny policy trained `steps` GRPO steps with hackable-rl's reward and no trace logging."""
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from hackable_rl.trl_parts import verifier_reward

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    dataset = load_dataset("json", data_files=str(data), split="train").select_columns(["prompt", "reference"])
    args = GRPOConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=8 * generations,
                      num_generations=generations, max_completion_length=64, logging_steps=1, report_to=[],
                      use_cpu=True, bf16=False, activation_checkpointing=False, gradient_checkpointing=False,
                      save_strategy="no")  # the CPU settings `hackable-rl train` uses (training/trl_args.py)
    reward = verifier_reward(members=["clean"], channel="flip", rate=0.2, args=args)
    recorder = StepRecords(reward)
    GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer,
                callbacks=[recorder]).train()
    return recorder


def logging_seconds_per_step(rows: dict[int, list[dict]], per_call: int, store: Path) -> float:
    """Seconds per step of writing the steps' traces with their assessments, `per_call` steps a call."""
    from mlflow import MlflowClient

    from hackable_rl.tracking.traces import step_trace_name, write_traces

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    experiment = client.create_experiment("bench", artifact_location=(store / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    traces = [(step_trace_name(step), step_rows, {"step": str(step)}) for step, step_rows in sorted(rows.items())]
    write_traces(client, run_id, [(step_trace_name(0), traces[0][1], {"step": "0"})])  # warm-up: imports, first queries
    started = time.perf_counter()
    for first in range(0, len(traces), per_call):
        write_traces(client, run_id, traces[first : first + per_call])
    return (time.perf_counter() - started) / len(traces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt; 8 prompts a step")
    parser.add_argument("--per-flush", type=int, default=50, help="steps a checkpoint's flush sends")
    parser.add_argument("--workdir", type=Path, default=None, help="a folder with prepared data and a warm start")
    options = parser.parse_args()
    if options.steps < 2:
        parser.error("--steps must be at least 2 (the first step is not timed)")
    workdir = (options.workdir or Path(tempfile.mkdtemp(prefix="bench-assessments-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    model_dir, data = _workdir_with_policy(workdir)
    recorded = baseline(model_dir, data, options.steps, options.generations, workdir / "grpo-out")
    step = statistics.median(recorded.times[1:])
    completions = statistics.median(len(rows) for rows in recorded.rows.values())
    with tempfile.TemporaryDirectory() as each, tempfile.TemporaryDirectory() as flushed:
        per_step = logging_seconds_per_step(recorded.rows, 1, Path(each))
        per_flush = logging_seconds_per_step(recorded.rows, options.per_flush, Path(flushed))
    print(f"baseline: median tiny-policy GRPO step {step:.3f} s ({completions:.0f} completions, no trace logging)")
    for label, seconds in (("one step a call (TRL callback)", per_step),
                           (f"{options.per_flush} steps a call (hackable-rl train)", per_flush)):
        print(f"  traces + assessments, {label}: {seconds * 1000:.1f} ms per step, ratio {seconds / step:.1%} "
              f"of the baseline step (target < 5%)")


if __name__ == "__main__":
    main()
