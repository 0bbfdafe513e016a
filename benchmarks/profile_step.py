"""Where the time of one GRPO step and one warm-start step goes, part by part.

Runs a short `hackable-rl train` (the main job's config, every record and MLflow on) and a short
warm start in this process, times each part with exclusive wall clocks (a part nested in another
is not counted twice), and prints seconds per step and each part's share:

    GRPO step:  generation | reward: verifier | reward: judge and records | loss forward | backward |
                optimizer | records (files, step metrics) | MLflow | checkpoints | other
    warm start: batch | forward | backward | optimizer | logging | other

"other" is the step's wall time minus every named part (TRL's and the Trainer's own bookkeeping,
data loading, Python). Run it alone on the machine: it times wall clocks.

    python benchmarks/profile_step.py [--steps 20] [--warmstart-steps 40] [--workdir DIR] [--set key=value ...]

`--workdir` reuses a folder with prepared data and a warm-started policy (both made there when
missing: the policy with the config's full warm start). The warm-start profile trains its own
short policy in `<workdir>/warmstart-profile/`.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

GRPO_PARTS = ("generation", "reward: verifier", "reward: judge and records", "loss forward", "backward",
              "optimizer", "records", "MLflow", "checkpoints")
WARMSTART_PARTS = ("batch", "forward", "backward", "optimizer", "logging")


class PartClock:
    """Exclusive wall time per part: time spent in a nested part is taken off its parent."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []  # [start, time taken by children]

    def wrap(self, owner: object, name: str, part: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            self._stack.append([time.perf_counter(), 0.0])
            try:
                return original(*args, **kwargs)
            finally:
                start, children = self._stack.pop()
                elapsed = time.perf_counter() - start
                self.seconds[part] += elapsed - children
                if self._stack:
                    self._stack[-1][1] += elapsed

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.seconds.clear()


def print_table(title: str, clock: PartClock, parts: tuple[str, ...], steps: int, wall: float) -> None:
    per_step = wall / steps
    named = {part: clock.seconds.get(part, 0.0) / steps for part in parts}
    named["other"] = per_step - sum(named.values())
    print(f"\n{title}: {per_step:.3f} s per step over {steps} steps")
    print("| part | s per step | share |\n| --- | --- | --- |")
    for part, seconds in named.items():
        print(f"| {part} | {seconds:.4f} | {seconds / per_step:.1%} |")


def profile_grpo(config, steps: int) -> None:
    """Times steps 2..N of a short training (the first step pays one-off set-up)."""
    import accelerate
    import torch
    from transformers import Trainer, TrainerCallback
    from trl import GRPOTrainer

    import hackable_rl.training.callback as callback_module
    from hackable_rl.reward.pipeline import ObjectiveReward, RewardPipeline
    from hackable_rl.tracking.tracker import Tracker
    from hackable_rl.training.callback import RunCallback
    from hackable_rl.training.run import run_training

    clock = PartClock()
    clock.wrap(GRPOTrainer, "_generate_single_turn", "generation")
    clock.wrap(ObjectiveReward, "__call__", "reward: judge and records")
    clock.wrap(RewardPipeline, "score", "reward: verifier")
    clock.wrap(GRPOTrainer, "compute_loss", "loss forward")
    clock.wrap(accelerate.Accelerator, "backward", "backward")
    clock.wrap(accelerate.Accelerator, "clip_grad_norm_", "optimizer")
    clock.wrap(torch.optim.AdamW, "step", "optimizer")
    clock.wrap(RunCallback, "on_step_end", "records")
    clock.wrap(RunCallback, "on_log", "records")
    for name in ("log_metrics", "log_table_files", "log_checkpoint", "log_dict", "log_artifact"):
        clock.wrap(Tracker, name, "MLflow")
    clock.wrap(callback_module, "save_permanent", "checkpoints")
    clock.wrap(Trainer, "_save_checkpoint", "checkpoints")

    class Window(TrainerCallback):
        """Starts the clock after step 1 and stops it at the last step's end."""

        started = finished = 0.0

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                clock.reset()
                Window.started = time.perf_counter()
            Window.finished = time.perf_counter()

    run_training(config, overwrite=True, extra_callbacks=[Window()])
    print_table("GRPO step (train, records and MLflow on)", clock, GRPO_PARTS, steps - 1,
                Window.finished - Window.started)


def profile_warmstart(config) -> None:
    """Times a short tiny-policy warm start's SFT loop (tokenizer and accuracy outside the window)."""
    import torch

    import hackable_rl.warmstart.sft as sft
    import hackable_rl.warmstart.stage as stage
    from hackable_rl.warmstart.stage import train_tiny_policy

    clock = PartClock()
    window = {}
    clock.wrap(sft, "collate", "batch")
    original_steps = sft.sft_steps

    def timed_steps(model, *args, **kwargs):
        # the model's forward and the loss's backward, timed from inside the loop
        clock.wrap(model, "forward", "forward")
        clock.wrap(torch.Tensor, "backward", "backward")
        window["start"] = time.perf_counter()
        try:
            return original_steps(model, *args, **kwargs)
        finally:
            window["end"] = time.perf_counter()
            window["seconds"] = dict(clock.seconds)  # the accuracy check's generation comes after: not a step

    stage.sft_steps = timed_steps
    clock.wrap(torch.optim.AdamW, "step", "optimizer")
    clock.wrap(torch.nn.utils, "clip_grad_norm_", "optimizer")
    original_logger = stage._step_logger

    def timed_logger(*args, **kwargs):
        on_step = original_logger(*args, **kwargs)
        holder = type("Holder", (), {"on_step": staticmethod(on_step)})
        clock.wrap(holder, "on_step", "logging")
        return holder.on_step

    stage._step_logger = timed_logger
    train_tiny_policy(config, Path(config.storage.cache_dir) / "warmstart.json")
    clock.seconds = window["seconds"]
    print_table("warm-start step (SFT, MLflow loss every 10 steps)", clock, WARMSTART_PARTS,
                config.warmstart.steps, window["end"] - window["start"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps (the first is not timed)")
    parser.add_argument("--warmstart-steps", type=int, default=40)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    options = parser.parse_args()
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="profile-step-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)

    from hackable_rl.config.loading import load_config
    from hackable_rl.config.runtime import use_torch_settings

    base = load_config(REPO / "params.yaml", options.overrides)
    use_torch_settings(base)
    datasets = workdir / "cache" / "datasets"
    if not (datasets / base.data.name).exists():
        from hackable_rl.data.prepare import prepare_dataset

        prepare_dataset(base)
    if not (workdir / "cache" / "models" / f"tiny-{base.data.name}").exists():
        from hackable_rl.warmstart import run_warmstart

        print(f"no policy in {workdir}: warm-starting one with the config's {base.warmstart.steps} steps")
        run_warmstart(base, workdir / "metrics" / "warmstart.json")
    # the warm-start profile writes its short policy into a cache of its own, beside the real one
    profile_cache = workdir / "warmstart-profile"
    if not (profile_cache / "datasets" / base.data.name).exists():  # a copy: storage refuses links out of it
        shutil.copytree(datasets / base.data.name, profile_cache / "datasets" / base.data.name)
    warm = load_config(REPO / "params.yaml", [f"warmstart.steps={options.warmstart_steps}", "warmstart.eval_size=20",
                                              f"storage.cache_dir={profile_cache}", *options.overrides])
    profile_warmstart(warm)
    grpo = load_config(REPO / "params.yaml", [f"trainer.max_steps={options.steps}", "trainer.save_steps=10",
                                              "trainer.permanent_steps=[10]", *options.overrides])
    profile_grpo(grpo, options.steps)

if __name__ == "__main__":
    main()
