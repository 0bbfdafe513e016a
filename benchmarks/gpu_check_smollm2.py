"""GPU check of the SmolLM2 setting (pipelines/smollm2_gsm8k), in under 10 minutes on one GPU.

The pipeline's own params.yaml with a shorter GRPO budget, in a scratch folder:
prepare (arithmetic) -> SFT warm start of the GGUF -> capability gate -> GRPO + LoRA in bf16.
Prints the device, precision and attention backend the trainer actually uses, the warm start's
validation accuracy, the gate's pass@k, and the time of every GRPO step (median and total).
Evaluation stages are left out (`dvc repro` in the pipeline runs them).

    python benchmarks/gpu_check_smollm2.py [--steps 40] [--workdir DIR]
    python benchmarks/gpu_check_smollm2.py --dry-run     # CPU-safe: config, plan and devices only

Expected on one recent GPU: model load about 15 s (GGUF dequantised on the CPU), warm start and
gate well under a minute each, a few seconds per GRPO step (64 completions of up to 64 tokens).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench_train_overhead import StepTimer  # benchmarks/ is on sys.path when a script here runs

from hackable_rl.config.loading import load_config

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO / "pipelines" / "smollm2_gsm8k" / "params.yaml"
LIMIT_S = 600


class StepReport(StepTimer):
    """What the trainer runs with (device, bf16, attention), then each step's wall time."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        attention = model.config._attn_implementation if model is not None else "unknown"
        device = next(model.parameters()).device if model is not None else "unknown"
        print(f"trainer: device {device}, bf16 {args.bf16}, attention backend {attention}", flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        super().on_step_end(args, state, control, **kwargs)
        print(f"step {state.global_step}: {self.times[-1]:.2f} s", flush=True)


def check_config(steps: int):
    """The pipeline's setting with the GRPO budget of this check (and no permanent checkpoint but the last)."""
    overrides = [
        f"trainer.max_steps={steps}",
        f"trainer.save_steps={steps}",
        "trainer.permanent_steps=[]",
        "tracking.run_name=gpu-check",
    ]
    return load_config(PARAMS, overrides)


def describe_devices() -> bool:
    import torch

    cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}, CUDA available: {cuda}")
    if cuda:
        print(f"GPU: {torch.cuda.get_device_name(0)}, bf16 supported: {torch.cuda.is_bf16_supported()}")
    return cuda


def run_check(config, workdir: Path) -> dict:
    from hackable_rl.data.prepare import prepare_dataset
    from hackable_rl.training.run import run_training
    from hackable_rl.warmstart import run_warmstart

    os.chdir(workdir)
    started = time.perf_counter()
    prepare_dataset(config)
    warm = run_warmstart(config, workdir / "metrics" / "warmstart.json")
    print(f"warm start: validation greedy accuracy {warm['accuracy']}, {warm['seconds']['total']:.0f} s", flush=True)
    report = StepReport()
    result = run_training(config, overwrite=True, extra_callbacks=[report])
    gate = json.loads((result.run_dir / "run.json").read_text())["capability"]
    times = report.times[1:] or report.times  # the first step includes warm-up (kernels, allocator)
    summary = {
        "steps": result.final_step,
        "median_step_s": statistics.median(times),
        "grpo_s": sum(report.times),
        "total_s": time.perf_counter() - started,
        "warmstart_accuracy": warm["accuracy"],
        "capability": gate,
        "judge_correctness_last": result.metrics.get("judge/correctness/last"),
    }
    print(json.dumps(summary, indent=2))
    if summary["total_s"] > LIMIT_S:
        print(f"!!! the check took {summary['total_s']:.0f} s, over its {LIMIT_S} s budget: lower --steps")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps (64 completions each).")
    parser.add_argument("--workdir", type=Path, default=None, help="Scratch folder (default: a temporary one).")
    parser.add_argument("--dry-run", action="store_true", help="Validate the config and show the plan; run nothing.")
    parser.add_argument("--allow-cpu", action="store_true", help="Run even without CUDA (hours on 2 cores).")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    config = check_config(args.steps)
    cuda = describe_devices()
    trainer = config.trainer
    print(
        f"plan: {config.model.source}, {config.data.provider} task, warm start {config.warmstart.steps} steps x "
        f"{config.warmstart.batch_size}, gate pass@{config.capability.k} on {config.capability.prompts} prompts, "
        f"GRPO {trainer.max_steps} steps x {trainer.per_device_train_batch_size} completions "
        f"({trainer.num_generations} per prompt, {config.generation.max_new_tokens} tokens), LoRA {config.lora.enabled}"
    )
    if args.dry_run:
        print("dry run: nothing trained")
        return
    if not cuda and not args.allow_cpu:
        raise SystemExit("no CUDA device: this check is for a GPU (--dry-run checks the config; --allow-cpu runs anyway)")
    if args.workdir is None:
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
            run_check(config, Path(folder))
    else:
        args.workdir.mkdir(parents=True, exist_ok=True)
        run_check(config, args.workdir.resolve())


if __name__ == "__main__":
    main()
