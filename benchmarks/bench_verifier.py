"""Throughput of the training verifier: parsing, a 5-member corrupted ensemble, disagreement and
robust shaping (the whole `RewardPipeline.score`, records included) over numeric completions.

    .venv/bin/python benchmarks/bench_verifier.py [--completions 100000] [--batch 1024]

Prints completions per second on one core (the target is >= 50,000/s, so that the verifier never
shows in a training step). Caches are cleared first, and every completion is distinct.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from hackable_rl.config import validate_config
from hackable_rl.rewards import build_reward_pipeline
from hackable_rl.rewards.parsing import _boxes, answers_match, normalize_number, parse_reference, parse_strict

GENERATIONS = 4


def make_batch(count: int, seed: int = 0) -> dict[str, list]:
    """Numeric arithmetic completions, 4 per prompt: mostly strict, some wrong, some malformed."""
    rng = random.Random(seed)
    columns: dict[str, list] = {"completions": [], "prompts": [], "ids": [], "references": [], "metadata": []}
    for index in range(count):
        prompt_index = index // GENERATIONS
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        answer = a + b + (0 if rng.random() < 0.6 else rng.randint(1, 9))
        shape = rng.random()
        if shape < 0.85:
            completion = f"<think>{a} + {b} = {answer} (try {index})</think> \\boxed{{{answer}}}"
        elif shape < 0.95:
            completion = f"<think>{a} + {b} is {answer}</think> the answer is {answer} #{index}"
        else:
            completion = f"<think>{a}+{b}</think> \\boxed{{{answer}}} \\boxed{{{answer + 1}}} #{index}"
        columns["completions"].append(completion)
        columns["prompts"].append(f"Problem {prompt_index}: what is {a} + {b}?")
        columns["ids"].append(f"p{prompt_index}")
        columns["references"].append(f"#### {a + b}")
        columns["metadata"].append({"n_steps": 1 + prompt_index % 3})
    return columns


def five_member_config(method: str = "robust", flawed: bool = False):
    """Five clean members, each flipped at 0.2; `flawed` makes the fifth a lenient_contains checker."""
    members = [{"name": f"m{i}", "checker": "clean", "corrupted": True} for i in range(4)]
    members.append({"name": "m4", "checker": "lenient_contains" if flawed else "clean", "corrupted": True})
    return validate_config(
        {
            "method": method,
            "verifier": {"members": members, "aggregation": "mean"},
            "corruption": {"channel": "flip", "rate": 0.2},
            "objective": {"mode": "additive", "rewards": ["format_tag_reward", "correctness_reward"]},
        }
    )


def clear_caches() -> None:
    for cached in (parse_strict, parse_reference, normalize_number, answers_match, _boxes):
        cached.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--flawed", action="store_true", help="make the fifth member lenient_contains")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, as the target says
    columns = make_batch(args.completions)
    pipeline = build_reward_pipeline(five_member_config(flawed=args.flawed))
    clear_caches()
    started, cpu_started = time.perf_counter(), time.process_time()
    for start in range(0, args.completions, args.batch):
        window = slice(start, start + args.batch)
        pipeline.score(
            columns["completions"][window],
            columns["prompts"][window],
            columns["ids"][window],
            columns["references"][window],
            columns["metadata"][window],
        )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(
        f"{args.completions} completions, 5 members{' (one lenient_contains)' if args.flawed else ''} (flip 0.2), robust shaping, batch {args.batch}: "
        f"{elapsed:.2f} s wall, {args.completions / elapsed:,.0f} completions/s on one core "
        f"({args.completions / cpu:,.0f}/s of CPU time: the figure on a shared, loaded machine)"
    )


if __name__ == "__main__":
    main()
