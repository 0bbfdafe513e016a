"""Throughput of the training verifier: parsing, a 5-member corrupted ensemble, disagreement and
robust shaping (`RewardPipeline.verify`), and of the whole reward call a training step makes
(`RewardPipeline.score`: the verifier plus the format reward and one record per completion).

    .venv/bin/python benchmarks/bench_verifier.py [--completions 100000] [--batch 1024]

Prints completions per second on one core for each (the target, >= 50,000/s, is the verifier's; the
full call is printed beside it so that nothing is hidden). Caches are cleared first, and every completion is distinct.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from hackable_rl.answers.numbers import normalize_number
from hackable_rl.answers.parsing import _boxes, answers_match, parse_reference, parse_strict
from hackable_rl.config.loading import validate_config
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example

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


def _verify_all(pipeline, columns, batch: int) -> None:
    """The training verifier alone (`RewardPipeline.verify`): parsing, the corrupted ensemble,
    disagreement and robust shaping, the part the target is about."""
    for start in range(0, len(columns["completions"]), batch):
        window = slice(start, start + batch)
        examples = [
            Example(i, r, m)
            for i, r, m in zip(columns["ids"][window], columns["references"][window], columns["metadata"][window], strict=True)
        ]
        pipeline.verify(columns["completions"][window], examples)


def _score_all(pipeline, columns, batch: int) -> None:
    """What a training step calls (`RewardPipeline.score`): the verifier plus the objective's other
    rewards and one flat record per completion for the generation log."""
    for start in range(0, len(columns["completions"]), batch):
        window = slice(start, start + batch)
        pipeline.score(
            columns["completions"][window],
            columns["prompts"][window],
            columns["ids"][window],
            columns["references"][window],
            columns["metadata"][window],
        )


def _timed(run) -> tuple[float, float]:
    clear_caches()
    started, cpu_started = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - started, time.process_time() - cpu_started


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
    setting = f"5 members{' (one lenient_contains)' if args.flawed else ''} (flip 0.2), robust shaping, batch {args.batch}"
    print(f"{args.completions} completions, {setting}:")
    for label, run in (
        ("verifier (parse, ensemble, disagreement, shaping)", lambda: _verify_all(pipeline, columns, args.batch)),
        ("full reward call (+ format reward, records)", lambda: _score_all(pipeline, columns, args.batch)),
    ):
        elapsed, cpu = _timed(run)
        print(
            f"  {label}: {elapsed:.2f} s wall, {args.completions / elapsed:,.0f} completions/s on one core "
            f"({args.completions / cpu:,.0f}/s of CPU time: the figure on a shared, loaded machine)"
        )


if __name__ == "__main__":
    main()
