"""SmolLM2-135M-Instruct: a GRPO + LoRA step and a test evaluation, today's path against the study's.

Both paths train the same warm-started policy on the same prompts with the same seed, in this
process, one after the other, and then evaluate their own final adapter on the same test prompts:

    today   LoRA r 16 on all 30 blocks, TRL's CPU loss head over every position, transformers'
            `generate` (every row to the longest), the adapter kept apart at evaluation
            (`lora.top_layers=null`, `trainer.head_on_completions=false`,
            `generation.drop_finished_rows=false`, `evaluation.merge_adapter=false`)
    study   the pipeline's params.yaml as it is (pipelines/smollm2_study: adapters on the top blocks
            only, the head on completion tokens, finished rows out of the decode, the adapter
            folded in before decoding)
    workers the study's adapter evaluated again with `evaluation.workers: 2` (its batches decoded side
            by side in two threads of one torch thread each); its completions are compared with the
            study's evaluation's, which they must equal token for token
    common  the same again with `evaluation.common_prefix_first: true` as well (each batch's padding
            after the tokens all its prompts share, which then run once per batch, each prompt's own
            once per prompt); it counts the completions that equal the study's
    bf16    the study's adapter evaluated again with `evaluation.dtype: bfloat16` (oneDNN's bf16
            products on a CPU with avx512_bf16; its equal-results check: benchmarks/equal_results_bf16.py)

Prints each path's seconds per GRPO step (steps 2..N; the first pays one-off set-up) split into
generation, loss forward, backward and the rest, its evaluation's wall time, and the ratios. Run it
alone on the machine: it times wall clocks.

    python benchmarks/bench_smollm2.py [--pipeline pipelines/smollm2_study] [--steps 6]
        [--eval-prompts 200] [--threads 2] [--workdir DIR]

200 evaluation prompts are the study's test evaluation (13 sampled batches and 4 greedy ones); with
only a few batches, two workers wait on the last one.

The pipeline folder must hold its prepared data and the warm start of seed 0 (`hackable-rl prepare`
and `hackable-rl warmstart` there); they are copied into the work folder.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

TODAY = ["lora.top_layers=null", "trainer.head_on_completions=false", "evaluation.merge_adapter=false",
         "generation.drop_finished_rows=false"]
PARTS = ("generation", "loss forward", "backward")


def _cpu_flags() -> str:
    from hackable_rl.core.numerics import cpu_has_flag

    return ", ".join(flag if cpu_has_flag(flag) == "yes" else f"no {flag}" for flag in ("avx512f", "avx512_bf16"))


def train_and_time(config, steps: int) -> tuple[float, dict[str, float], Path]:
    """(seconds per step over steps 2..N, seconds per step of each part, the final adapter's folder)."""
    import accelerate
    from profile_step import PartClock
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from hackable_rl.training.run import run_training

    clock = PartClock()
    clock.wrap(GRPOTrainer, "_generate_single_turn", "generation")
    clock.wrap(GRPOTrainer, "compute_loss", "loss forward")
    clock.wrap(accelerate.Accelerator, "backward", "backward")
    window = {}

    class Window(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                clock.reset()
                window["start"] = time.perf_counter()
            window["end"] = time.perf_counter()

    try:
        result = run_training(config, overwrite=True, extra_callbacks=[Window()])
    finally:  # the wrappers stay off the other path's classes
        GRPOTrainer._generate_single_turn = GRPOTrainer._generate_single_turn.__wrapped__
        GRPOTrainer.compute_loss = GRPOTrainer.compute_loss.__wrapped__
        accelerate.Accelerator.backward = accelerate.Accelerator.backward.__wrapped__
    timed = steps - 1
    per_step = (window["end"] - window["start"]) / timed
    parts = {part: clock.seconds.get(part, 0.0) / timed for part in PARTS}
    parts["other"] = per_step - sum(parts.values())
    return per_step, parts, result.run_dir / "checkpoints" / "permanent" / f"step-{steps}"


def evaluate_and_time(config, adapter: Path) -> tuple[float, dict]:
    """(wall seconds of a test evaluation of the adapter: sampled and greedy, judged and scored, load
    included; its pass@1, greedy accuracy and completions)."""
    from hackable_rl.evaluation.stage.evaluate import sample_and_score
    from hackable_rl.evaluation.stage.targets import target_from_model

    start = time.perf_counter()
    sampled, greedy = sample_and_score(target_from_model(config, adapter))
    seconds = time.perf_counter() - start
    pass1 = sum(r["correct"] for r in sampled) / len(sampled) if sampled else float("nan")
    greedy_accuracy = sum(r["correct"] for r in greedy) / len(greedy) if greedy else float("nan")
    texts = [r["completion"] for r in sampled + greedy]
    return seconds, {"pass@1": pass1, "greedy": greedy_accuracy, "completions": len(texts), "texts": texts}


def _copy_inputs(pipeline: Path, workdir: Path, config) -> None:
    from hackable_rl.models.loading import policy_dir

    for name in (f"datasets/{config.data.name}", f"models/{policy_dir(config).name}"):
        source, target = pipeline / "cache" / name, workdir / "cache" / name
        if not source.exists():
            raise SystemExit(f"{source}: missing; run `hackable-rl prepare` and `hackable-rl warmstart` in {pipeline}")
        if not target.exists():
            shutil.copytree(source, target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", type=Path, default=REPO / "pipelines" / "smollm2_study")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per path (the first is not timed)")
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None)
    options = parser.parse_args()
    if options.steps < 2 or options.eval_prompts < 1 or options.threads < 1:
        parser.error("--steps must be at least 2 (the first is not timed); --eval-prompts and --threads at least 1")
    pipeline = options.pipeline.resolve()
    workdir = (options.workdir or Path(tempfile.mkdtemp(prefix="bench-smollm2-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)

    from hackable_rl.config.loading import load_config
    from hackable_rl.config.runtime import use_torch_settings

    common = [f"torch_threads={options.threads}", f"trainer.max_steps={options.steps}",
              f"trainer.save_steps={options.steps}", "trainer.permanent_steps=[]", "tracking.enabled=true",
              f"evaluation.max_prompts={options.eval_prompts}", "capability.enabled=false"]
    configs = {
        "today": load_config(pipeline / "params.yaml", [*common, *TODAY, "tracking.run_name=today"]),
        "study": load_config(pipeline / "params.yaml", [*common, "tracking.run_name=study"]),
    }
    use_torch_settings(configs["today"])
    _copy_inputs(pipeline, workdir, configs["today"])
    print(f"SmolLM2-135M-Instruct, {platform.processor() or platform.machine()} ({_cpu_flags()}), "
          f"torch threads {options.threads}; {configs['study'].trainer.per_device_train_batch_size} completions per "
          f"step (groups of {configs['study'].trainer.num_generations}), up to "
          f"{configs['study'].generation.max_new_tokens} new tokens; evaluation {options.eval_prompts} test prompts x "
          f"{configs['study'].evaluation.n} samples + greedy")
    results, texts = {}, {}
    for name, config in configs.items():
        per_step, parts, adapter = train_and_time(config, options.steps)
        eval_seconds, outcome = evaluate_and_time(config, adapter)
        results[name], texts[name] = (per_step, parts, eval_seconds), outcome["texts"]
        split = ", ".join(f"{part} {seconds:.2f}" for part, seconds in parts.items())
        print(f"{name}: GRPO step {per_step:.2f} s ({split}); evaluation {eval_seconds:.1f} s "
              f"({_outcome(outcome)})")
    # The study's adapter again, one side-by-side worker per thread, then also with each batch's common
    # prompt tokens first (the same tokens, or it says how many differ).
    extra = {"workers": float("nan"), "common_first": float("nan")}
    if options.threads > 1:
        for name, overrides in (("workers", [f"evaluation.workers={options.threads}"]),
                                ("common_first", [f"evaluation.workers={options.threads}",
                                                  "evaluation.common_prefix_first=true"])):
            config = load_config(pipeline / "params.yaml", [*common, "tracking.run_name=study", *overrides])
            extra[name], outcome = evaluate_and_time(config, adapter)
            same = sum(a == b for a, b in zip(outcome["texts"], texts["study"], strict=True))
            print(f"study + {' + '.join(overrides)}: evaluation {extra[name]:.1f} s ({_outcome(outcome)}); "
                  f"{same} of {len(texts['study'])} completions identical to the study's evaluation")
    # The study's adapter again, decoded in bfloat16 (an opt-in: benchmarks/equal_results_bf16.py).
    bf16 = load_config(pipeline / "params.yaml", [*common, "tracking.run_name=study", "evaluation.dtype=bfloat16"])
    bf16_eval, outcome = evaluate_and_time(bf16, adapter)
    print(f"study + evaluation.dtype=bfloat16: evaluation {bf16_eval:.1f} s ({_outcome(outcome)})")
    (today_step, _, today_eval), (study_step, _, study_eval) = results["today"], results["study"]
    print(f"ratio study/today: GRPO step {study_step / today_step:.3f}, evaluation {study_eval / today_eval:.3f}, "
          f"evaluation with {options.threads} workers {extra['workers'] / today_eval:.3f}, and common prompt tokens "
          f"first {extra['common_first'] / today_eval:.3f}, in bfloat16 {bf16_eval / today_eval:.3f} (target <= 0.6 each)")


def _outcome(outcome: dict) -> str:
    return (f"{outcome['completions']} completions, pass@1 {outcome['pass@1']:.3f}, "
            f"greedy {outcome['greedy']:.3f}")


if __name__ == "__main__":
    main()
