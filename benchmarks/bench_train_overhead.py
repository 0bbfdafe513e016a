"""Overhead of `hackable-rl train` over a bare TRL GRPOTrainer, in one process.

Both train the same warm-started tiny policy on the same prompts with the same GRPO settings.
The bare run uses a plain correctness reward and no callbacks of ours; the full run has every
generation record, the verifier ensemble, the independent judge and MLflow on. Prints the median
step time of each and their ratio (target: at most 0.6, the project ahead of bare TRL).

A bare trainer's median step moved by 0.2 s between two runs of 12 steps here, so `--repeats N`
runs the pair N times, alternating which goes first, and prints every pair's ratio and their median.

    python benchmarks/bench_train_overhead.py [--steps 12] [--repeats 1] [--workdir DIR]

`--workdir` holding prepared data and a policy (cache/models/tiny-arith) measures that policy, e.g. a
copy of the main job's warm start; without one, a 60-step warm start is made there, quick but a
weaker policy whose longer completions give generation a larger share of the step.
"""

# hackable_rl is imported before transformers on purpose (it pins the CPU dispatch before torch loads)
from __future__ import annotations  # noqa: I001

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import hackable_rl  # noqa: F401  (first: pins the CPU dispatch before transformers loads torch)
from hackable_rl.config.loading import load_config
from transformers import TrainerCallback

REPO = Path(__file__).resolve().parents[1]


class StepTimer(TrainerCallback):
    """Wall time between consecutive step ends (generation, rewards, backward and our callbacks)."""

    def __init__(self):
        self.times: list[float] = []
        self._last: float | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self._last is None:
            self._last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.times.append(now - self._last)
        self._last = now


def bare_trl(config, steps: int, output_dir: Path) -> list[float]:
    from datasets import Dataset
    from trl import GRPOTrainer

    from hackable_rl.answers.parsing import answers_match, extract_boxed
    from hackable_rl.data.prepare import read_prepared
    from hackable_rl.models.loading import load_policy
    from hackable_rl.training.trl_args import build_grpo_args

    def correctness(completions, reference, **_):
        return [float(extract_boxed(c) is not None and answers_match(extract_boxed(c), r))
                for c, r in zip(completions, reference, strict=True)]

    model, tokenizer = load_policy(config)
    rows = read_prepared(config, "train")
    dataset = Dataset.from_list([{"prompt": r["prompt"], "reference": r["reference"]} for r in rows])
    timer = StepTimer()
    args = build_grpo_args(config, output_dir)
    args.max_steps = steps
    trainer = GRPOTrainer(model=model, reward_funcs=[correctness], args=args, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[timer])
    trainer.train()
    return timer.times


def full_run(config, steps: int) -> list[float]:
    from hackable_rl.training.run import run_training

    timer = StepTimer()
    run_training(config, overwrite=True, extra_callbacks=[timer])
    return timer.times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=1, help="Pairs of runs, alternating which goes first.")
    parser.add_argument("--workdir", type=Path, default=None, help="A folder with prepared data and a warm start.")
    options = parser.parse_args()
    if options.steps < 2 or options.repeats < 1:
        parser.error("--steps must be at least 2 (the first is not timed) and --repeats at least 1")
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="bench-train-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    overrides = [f"trainer.max_steps={options.steps}", f"trainer.save_steps={options.steps}",
                 "trainer.permanent_steps=[]", "warmstart.steps=60", "warmstart.eval_size=20"]
    config = load_config(REPO / "params.yaml", overrides)
    if not (workdir / "cache" / "models" / f"tiny-{config.data.name}").exists():
        from hackable_rl.data.prepare import prepare_dataset
        from hackable_rl.warmstart import run_warmstart

        prepare_dataset(config)
        run_warmstart(config, workdir / "metrics" / "warmstart.json")
    print(f"steps per run: {options.steps} (first step excluded from the medians)")
    runs = {"bare": lambda: bare_trl(config, options.steps, workdir / "bare"),
            "full": lambda: full_run(config, options.steps)}
    ratios = []
    for repeat in range(options.repeats):
        order = ("bare", "full") if repeat % 2 == 0 else ("full", "bare")
        medians = {kind: statistics.median(runs[kind]()[1:]) for kind in order}
        ratios.append(medians["full"] / medians["bare"])
        print(f"pair {repeat + 1} ({order[0]} first): bare TRL GRPOTrainer median step {medians['bare']:.3f} s, "
              f"hackable-rl train (records, verifier, judge, MLflow) {medians['full']:.3f} s, "
              f"ratio {ratios[-1]:.3f}")
    spread = f" (pairs {min(ratios):.3f}-{max(ratios):.3f})" if len(ratios) > 1 else ""
    print(f"ratio: {statistics.median(ratios):.3f}{spread} (target <= 0.6)")


if __name__ == "__main__":
    main()
