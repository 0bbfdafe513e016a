"""How fast is the independent judge, and does any call outlive its timeout?

Two workloads, both on the real held-out data the repository carries (data/):

1. GSM8K-style numeric answers: four strict/hedged/non-strict completions per test reference
   (right, wrong, hedged, bare), each with distinct thinking text so the parse caches miss as
   they do in evaluation; caches are cleared before the timed pass. Target: >= 5,000 judgments/s.
2. MATH-500 reference solutions: each solution judged (boxed extraction) against its own answer,
   against its answer rewritten (`\\left`/`\\right` dropped, `\\dfrac` -> `\\frac`, so it goes to
   math-verify), and against another problem's answer. Reports judgments/s, per-call max latency,
   how many calls reached the math-verify timeout, and that no call ran past it.

Run: `.venv/bin/python benchmarks/bench_judge.py [--timeout-s 2.0] [--math-limit 500]`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hackable_rl.answers import mathverify, numbers, parsing
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.evaluation import judge as judge_module
from hackable_rl.evaluation.judge import judge_completion

DATA = Path(__file__).resolve().parents[1] / "data"  # the pinned data sets (data/README.md)
GSM8K_TARGET_PER_S = 5000.0
# A call may exceed timeout_s by the worker kill/join and pipe overhead, not by another timeout.
TIMEOUT_SLACK_S = 0.5


def clear_caches() -> None:
    """Every lru_cache on the judge's path, so a timed pass measures parsing, not dictionary hits."""
    for cached in (
        parsing.parse_strict,
        parsing.parse_reference,
        numbers.normalize_number,
        parsing.answers_match,
        judge_module._parsed_reference,
    ):
        cached.cache_clear()


def gsm8k_cases() -> list[tuple[str, str]]:
    cases = []
    for index, row in enumerate(read_jsonl(DATA / "gsm8k" / "test.jsonl")):
        reference = row["answer"]
        answer = parsing.parse_reference(reference)
        thinking = f"step {index}: {row['question'][:120]}"
        cases += [
            (f"<think>{thinking}</think> \\boxed{{{answer}}}", reference),
            (f"<think>{thinking} (b)</think> \\boxed{{{index + 0.5}}}", reference),
            (f"<think>{thinking} (c)</think> \\boxed{{{answer}}} \\boxed{{{index}}}", reference),
            (f"{thinking} so the answer is {answer}", reference),
        ]
    return cases


def bench_gsm8k(timeout_s: float) -> dict:
    cases = gsm8k_cases()
    clear_caches()
    started = time.perf_counter()
    judgments = [judge_completion(c, r, timeout_s=timeout_s) for c, r in cases]
    seconds = time.perf_counter() - started
    return {
        "workload": "gsm8k numeric (strict)",
        "judgments": len(cases),
        "seconds": round(seconds, 4),
        "per_second": round(len(cases) / seconds),
        "correct": sum(j.correct is True for j in judgments),
        "meets_target": len(cases) / seconds >= GSM8K_TARGET_PER_S,
    }


def bench_gsm8k_cascade() -> dict:
    solutions = [row["answer"] for row in read_jsonl(DATA / "gsm8k" / "test.jsonl")]
    clear_caches()
    started = time.perf_counter()
    judgments = [judge_completion(s, s, extract="cascade") for s in solutions]
    seconds = time.perf_counter() - started
    return {
        "workload": "gsm8k reference solutions (cascade, own answer)",
        "judgments": len(solutions),
        "seconds": round(seconds, 4),
        "per_second": round(len(solutions) / seconds),
        "correct": sum(j.correct is True for j in judgments),
    }


def _rewritten(answer: str) -> str:
    return answer.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac")


def math_cases(limit: int) -> list[tuple[str, str, str]]:
    rows = read_jsonl(DATA / "math500" / "test.jsonl")[:limit]
    cases = []
    for index, row in enumerate(rows):
        other = rows[(index + len(rows) // 2) % len(rows)]["answer"]
        cases += [
            ("own", row["solution"], row["answer"]),
            ("rewritten", f"\\boxed{{{_rewritten(row['answer'])}}}", row["answer"]),
            ("other", row["solution"], other),
        ]
    return cases


def bench_math(limit: int, timeout_s: float) -> dict:
    # Start the math-verify worker outside the timed pass (a one-off cost, reported apart).
    started = time.perf_counter()
    mathverify.math_verify_equal("x^2", "x^{2}", timeout_s=60.0)
    startup_s = time.perf_counter() - started
    cases = math_cases(limit)
    clear_caches()
    before = dict(mathverify.STATS)
    latencies, correct = [], {"own": 0, "rewritten": 0, "other": 0}
    for kind, completion, reference in cases:
        started = time.perf_counter()
        judgment = judge_completion(completion, reference, extract="boxed", timeout_s=timeout_s)
        latencies.append(time.perf_counter() - started)
        correct[kind] += judgment.correct is True
    delta = {key: mathverify.STATS[key] - before[key] for key in before}
    return {
        "workload": "math500 solutions (boxed)",
        "judgments": len(cases),
        "seconds": round(sum(latencies), 3),
        "per_second": round(len(cases) / sum(latencies), 1),
        "worker_startup_s": round(startup_s, 2),
        "max_latency_s": round(max(latencies), 4),
        "p99_latency_s": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 4),
        "math_verify_calls": delta["calls"],
        "timeouts": delta["timeouts"],
        "too_long": delta["too_long"],
        "errors": delta["errors"],
        "past_timeout": sum(latency > timeout_s + TIMEOUT_SLACK_S for latency in latencies),
        "correct_own_of": f"{correct['own']}/{limit}",
        "correct_rewritten_of": f"{correct['rewritten']}/{limit}",
        "correct_other_of": f"{correct['other']}/{limit}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-s", type=float, default=2.0, help="math-verify timeout per call")
    parser.add_argument("--math-limit", type=int, default=500, help="MATH-500 problems used")
    args = parser.parse_args()
    results = [
        bench_gsm8k(args.timeout_s),
        bench_gsm8k_cascade(),
        bench_math(args.math_limit, args.timeout_s),
    ]
    for result in results:
        print(json.dumps(result))
    mathverify._WORKER.close()


if __name__ == "__main__":
    main()
