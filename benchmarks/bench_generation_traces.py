"""What the MLflow traces of the generation records cost per training step, on the embedded SQLite store.

Measures, in one process and one store, a step of `--completions` records (the main job's 64) written
as the trace the project logs (one trace per step, one span per completion, `tracking/traces.py`),
against the design it rejected (one trace per completion with two assessments, the verifier's reward
and the judge's verdict, which would let the Traces list filter by verdict directly). Prints seconds
per step of each, their ratio, and each as a share of a training step of `--step-seconds` (default:
the main job's 2.166 s per GRPO step, docs/results.md).

    python benchmarks/bench_generation_traces.py [--steps 50] [--per-flush 50] [--completions 64] [--step-seconds 2.166]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

MAIN_JOB_STEP_SECONDS = 2.166


def _row(index: int, step: int) -> dict:
    """A generation record shaped like the main job's (one ensemble member)."""
    return {
        "step": step, "prompt_id": f"arith-train-{index // 8:05d}",
        "prompt": "Solve the problem. Think inside <think></think>, then give only the final answer in \\boxed{}.\n"
                  "Problem: Mia has 14 apples. Mia sells 2 of them. How many apples does Mia have now?\nAnswer: ",
        "completion": "<think>14 - 2 = 12</think> \\boxed{12}" * 2, "reference": "12", "prompt_tokens": 104,
        "completion_tokens": 40, "strict": True, "strict_answer": "12", "method": "baseline",
        "member.m0.clean_reward": 1.0, "member.m0.clean_confidence": 1.0, "member.m0.reward": float(index % 5 == 0),
        "member.m0.confidence": 1.0, "member.m0.parsed": "12", "member.m0.reason": "flipped",
        "reward": float(index % 5 == 0), "optimised_reward": 1.0, "final_reward": 1.0, "advantage": 0.25,
        "correct": index % 3 == 0, "parsed": "12", "reason": "equal",
    }


def time_step_traces(client, run_id: str, steps: int, completions: int, per_flush: int) -> float:
    """Seconds per step of writing `steps` steps as traces, `per_flush` steps a call (a checkpoint's flush)."""
    from hackable_rl.tracking.traces import step_trace_name, write_traces

    traces = [
        (step_trace_name(step), [_row(index, step) for index in range(completions)], {"run_name": "bench", "step": str(step)})
        for step in range(1, steps + 1)
    ]
    started = time.perf_counter()
    for first in range(0, steps, per_flush):
        write_traces(client, run_id, traces[first : first + per_flush])
    return (time.perf_counter() - started) / steps


def time_completion_traces(client, run_id: str, completions: int) -> float:
    """One step as one trace per completion (one span, two assessments), written the same direct way."""
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.tracing.client import TracingClient

    from hackable_rl.tracking.traces import step_trace

    experiment_id = client.get_run(run_id).info.experiment_id
    tracing = TracingClient(client.tracking_uri)
    source = AssessmentSource(source_type="CODE", source_id="hackable-rl")
    started = time.perf_counter()
    for index in range(completions):
        row = _row(index, 1)
        info, spans = step_trace(run_id, experiment_id, f"completion {index}", [row], {"step": "1"},
                                 int(time.time() * 1000))
        info.assessments = [
            Feedback(name="verifier", value=row["reward"], source=source, trace_id=info.trace_id),
            Feedback(name="judge", value=row["correct"], source=source, trace_id=info.trace_id),
        ]
        tracing.log_spans(experiment_id, spans)
        tracing.start_trace(info)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--per-flush", type=int, default=50, help="steps a flush sends: the main job checkpoints every 50")
    parser.add_argument("--step-seconds", type=float, default=MAIN_JOB_STEP_SECONDS)
    args = parser.parse_args()
    from mlflow import MlflowClient

    with tempfile.TemporaryDirectory() as scratch:
        client = MlflowClient(f"sqlite:///{Path(scratch) / 'mlflow.db'}")
        experiment = client.create_experiment("bench", artifact_location=(Path(scratch) / "artifacts").as_uri())
        run_id = client.create_run(experiment).info.run_id
        time_step_traces(client, run_id, 1, args.completions, 1)  # warm-up: imports, the first queries
        per_step = time_step_traces(client, run_id, args.steps, args.completions, args.per_flush)
        per_completion = time_completion_traces(client, run_id, args.completions)
    print(f"one trace per step ({args.completions} spans): {per_step * 1000:.0f} ms per step ({args.steps} "
          f"steps, {args.per_flush} a flush), {per_step / args.step_seconds:.1%} of a {args.step_seconds} s training step")
    print(f"one trace per completion (+2 assessments): {per_completion * 1000:.0f} ms per step, "
          f"{per_completion / args.step_seconds:.1%} of a training step")
    print(f"ratio per-completion / per-step traces: {per_completion / per_step:.1f}")


if __name__ == "__main__":
    main()
