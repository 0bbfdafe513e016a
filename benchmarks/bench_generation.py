"""Batched sampling throughput (generated tokens per second) of the policy models on this machine.

Measures both the settings training rollouts use (`generation` section of params.yaml) and those
held-out evaluation uses (`evaluation` decoding), on the prompts of
the prepared held-out split when present (else rendered synthetic prompts). The tiny model is the
warm-started one when it exists, else a freshly built one of the configured size (same cost).

    .venv/bin/python benchmarks/bench_generation.py                  # tiny + SmolLM2-135M
    .venv/bin/python benchmarks/bench_generation.py --models tiny --prompts 64 --batch-size 32
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import load_config
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.core.storage import Storage
from hackable_rl.data.prompting import render_prompt
from hackable_rl.models.generation import GenerationSettings, generate_completions
from hackable_rl.models.loading import SMOLLM2, format_prompt, is_instruct_policy, load_policy, policy_dir
from hackable_rl.models.tiny import build_tiny_model
from hackable_rl.models.tokenizer import train_tokenizer

log = logging.getLogger("bench_generation")


def bench_prompts(config: ExperimentConfig, count: int) -> list[str]:
    held_out = Storage.from_config(config.storage.cache_dir).dataset_dir(config.data.name) / "test.jsonl"
    if held_out.exists():
        return [row["prompt"] for row in read_jsonl(held_out)][:count]
    return [
        render_prompt(f"Ann has {3 + i} pens. Ann buys {i % 7 + 2} more. How many pens?")
        for i in range(count)
    ]


def tiny_policy(config: ExperimentConfig, prompts: list[str]):
    if (policy_dir(config) / "config.json").exists():
        return (*load_policy(config), "warm-started")
    tokenizer = train_tokenizer(prompts * 4, config.model.tiny.vocab_size)
    torch.manual_seed(config.seed)
    return build_tiny_model(config.model.tiny, tokenizer).eval(), tokenizer, "untrained (no warm start yet)"


SETTINGS = {"training": GenerationSettings.for_training, "evaluation": GenerationSettings.for_evaluation}


def measure(name: str, config: ExperimentConfig, prompts: list[str], batch_size: int, kind: str) -> dict:
    if name == "tiny":
        model, tokenizer, state = tiny_policy(config, prompts)
    else:
        smol = config.model_copy(update={"model": config.model.model_copy(update={"source": SMOLLM2})})
        model, tokenizer = load_policy(smol)
        state = "GGUF Q4_1 dequantised to float32"
        prompts = [format_prompt(tokenizer, p, is_instruct_policy(smol, tokenizer)) for p in prompts]
    settings = SETTINGS[kind](config)
    generate_completions(model, tokenizer, prompts[:2], settings.__class__(max_new_tokens=4), 2, 0)  # warm-up
    started = time.perf_counter()
    outputs = generate_completions(model, tokenizer, prompts, settings, batch_size, config.seed)
    seconds = time.perf_counter() - started
    tokens = sum(output.n_tokens for output in outputs)
    return {
        "model": name,
        "settings": kind,
        "state": state,
        "parameters": model.num_parameters(),
        "prompts": len(prompts),
        "batch_size": batch_size,
        "max_new_tokens": settings.max_new_tokens,
        "temperature": settings.temperature,
        "generated_tokens": tokens,
        "seconds": round(seconds, 2),
        "tokens_per_second": round(tokens / seconds, 1),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("params.yaml"))
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"], choices=["tiny", "smollm2"])
    parser.add_argument("--prompts", type=int, default=32, help="prompts per model (tiny)")
    parser.add_argument("--smollm2-prompts", type=int, default=8, help="prompts for SmolLM2 (slow on CPU)")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per generate call")
    parser.add_argument(
        "--settings", nargs="+", default=["training", "evaluation"], choices=sorted(SETTINGS),
        help="generation settings: training rollouts (generation.*) and/or held-out evaluation (evaluation.*)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = load_config(args.config)
    for name in args.models:
        count = args.prompts if name == "tiny" else args.smollm2_prompts
        for kind in args.settings:
            result = measure(name, config, bench_prompts(config, count), min(args.batch_size, count), kind)
            print(json.dumps(result))


if __name__ == "__main__":
    main()
