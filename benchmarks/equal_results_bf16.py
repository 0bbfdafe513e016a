"""Equal results of a bfloat16 evaluation (`evaluation.dtype: bfloat16`) against float32, on validation.

bf16 rounds every matrix product otherwise than float32, so an evaluation in bf16 is not the same
bytes: it is kept as an opt-in only if its outcomes are the same within a declared margin. This
evaluates trained SmolLM2 adapters of the real-model study (each replicate's clean reference, final
step) on validation prompts twice, float32 and bfloat16, with the same sampling seed, and compares
them paired by prompt and replicate: pass@1 and greedy accuracy, the 95% t-interval across the
replicates and the equivalence test inside +-margin (TOST, docs/metrics.md), and the share of
completions that came out token for token the same.

    python benchmarks/equal_results_bf16.py [--pipeline pipelines/smollm2_study] [--seeds 0,1,2]
        [--prompts 200] [--lanes 2] [--margin 0.02] [--out benchmarks/equal_results/bf16.json]

Each evaluation runs in its own process with one torch thread, `--lanes` at a time. Needs the
study's prepared data, warm starts and trained reference runs (`cache/artifacts/runs/...`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("float32", "bfloat16")


def _adapter(pipeline: Path, seed: int) -> Path:
    steps = pipeline / "cache" / "artifacts" / "runs" / f"baseline-clean-s{seed}" / "checkpoints" / "permanent"
    finals = sorted(steps.glob("step-*"), key=lambda path: int(path.name.split("-")[1]))
    if not finals:
        raise SystemExit(f"{steps}: no permanent checkpoint; run the study's reference@{seed} first")
    return finals[-1]


def evaluate(pipeline: Path, seed: int, dtype: str, prompts: int) -> dict:
    """One evaluation in this (worker) process: {id: (sampled completions, their correctness, greedy
    completion, its correctness)}."""
    os.chdir(pipeline)
    from hackable_rl.config.loading import load_config
    from hackable_rl.config.runtime import use_torch_settings
    from hackable_rl.evaluation.stage.evaluate import sample_and_score
    from hackable_rl.evaluation.stage.targets import target_from_model

    config = load_config(pipeline / "params.yaml", [
        f"seed={seed}", "torch_threads=1", "tracking.enabled=false", "evaluation.split=validation",
        f"evaluation.max_prompts={prompts}", f"evaluation.dtype={dtype}"])
    use_torch_settings(config)
    sampled, greedy = sample_and_score(target_from_model(config, _adapter(pipeline, seed)))
    by_prompt: dict[str, dict] = {}
    for record in sampled:
        entry = by_prompt.setdefault(str(record["prompt_id"]), {"sampled": [], "correct": []})
        entry["sampled"].append(record["completion"])
        entry["correct"].append(float(bool(record["correct"])))
    for record in greedy:
        by_prompt[str(record["prompt_id"])].update(greedy=record["completion"], greedy_correct=float(bool(record["correct"])))
    return by_prompt


def compare(results: dict[tuple[int, str], dict], seeds: list[int], margin: float) -> dict:
    import numpy as np

    from hackable_rl.evaluation.paired import compare_matrix

    ids = sorted(results[(seeds[0], "float32")])
    rows = {"pass_at_1": [], "greedy_accuracy": []}
    same_sampled = same_greedy = total_sampled = 0
    for seed in seeds:
        plain, bf16 = results[(seed, "float32")], results[(seed, "bfloat16")]
        rows["pass_at_1"].append([np.mean(bf16[i]["correct"]) - np.mean(plain[i]["correct"]) for i in ids])
        rows["greedy_accuracy"].append([bf16[i]["greedy_correct"] - plain[i]["greedy_correct"] for i in ids])
        same_greedy += sum(bf16[i]["greedy"] == plain[i]["greedy"] for i in ids)
        same_sampled += sum(a == b for i in ids for a, b in zip(bf16[i]["sampled"], plain[i]["sampled"], strict=True))
        total_sampled += sum(len(plain[i]["sampled"]) for i in ids)
    out = {"seeds": seeds, "prompts": len(ids), "margin": margin,
           "identical_greedy_share": same_greedy / (len(ids) * len(seeds)),
           "identical_sampled_share": same_sampled / total_sampled,
           "float32": {}, "bfloat16": {}, "comparisons": {}}
    for dtype in DTYPES:
        out[dtype] = {
            "pass_at_1": [float(np.mean([np.mean(results[(s, dtype)][i]["correct"]) for i in ids])) for s in seeds],
            "greedy_accuracy": [float(np.mean([results[(s, dtype)][i]["greedy_correct"] for i in ids])) for s in seeds]}
    for metric, matrix in rows.items():
        comparison = compare_matrix(metric, np.array(matrix), len(ids), margin=margin)
        out["comparisons"][metric] = {
            "diff": comparison.diff, "ci_low": comparison.ci_low, "ci_high": comparison.ci_high,
            "per_replicate": comparison.per_replicate, "ci90": [comparison.equivalence.ci90_low,
                                                                comparison.equivalence.ci90_high],
            "verdict": comparison.equivalence.verdict}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", type=Path, default=REPO / "pipelines" / "smollm2_study")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "equal_results" / "bf16.json")
    options = parser.parse_args()
    seeds = [int(seed) for seed in options.seeds.split(",")]
    if len(seeds) < 2 or options.prompts < 1 or options.lanes < 1:
        parser.error("--seeds needs at least two replicates; --prompts and --lanes at least 1")
    pipeline = options.pipeline.resolve()
    for seed in seeds:
        _adapter(pipeline, seed)
    jobs = [(seed, dtype) for seed in seeds for dtype in DTYPES]
    with ProcessPoolExecutor(options.lanes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {job: pool.submit(evaluate, pipeline, *job, options.prompts) for job in jobs}
        results = {job: future.result() for job, future in futures.items()}
    out = compare(results, seeds, options.margin)
    out["cpu"] = _cpu()
    # deferred: this script imports hackable_rl inside functions, as its spawned workers do
    from hackable_rl.core.numerics import MACHINE_KEY, machine_record

    out[MACHINE_KEY] = machine_record()
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({key: out[key] for key in ("identical_greedy_share", "identical_sampled_share", "comparisons",
                                                 "cpu")}, indent=2))


def _cpu() -> dict:
    sys.path.insert(0, str(REPO / "src"))
    from hackable_rl.core.numerics import cpu_has_flag

    return {flag: cpu_has_flag(flag) for flag in ("avx512f", "avx512_bf16", "amx_bf16")}


if __name__ == "__main__":
    main()
