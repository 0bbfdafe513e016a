"""What the MLflow traces of the generation records cost per training step, on the embedded SQLite store.

Measures, in one process and one store, a step of `--completions` records (the main job's 64) written
three ways, each `--steps` steps sent `--per-flush` steps a call (a checkpoint's flush):

- the project's writer (`tracking/traces.py`): one trace per step, its row in the store and its spans
  (one per completion) as one JSON file in the trace's artifact folder;
- the same traces with their spans in the store's span table (`log_spans`, one SQL row per span): the
  writer the project used before, the baseline of the ratio printed last;
- the design rejected first: one trace per completion with two assessments (the verifier's reward and
  the judge's verdict), which would let the Traces list filter by verdict directly.

Prints milliseconds per step of each and each as a share of a training step of `--step-seconds`
(default: the main job's 2.166 s per GRPO step on this machine, docs/results.md). The three are timed
in turn in one process, so a load on the machine weighs on all of them; the ratios are the figures to
compare across runs.

    python benchmarks/bench_generation_traces.py [--steps 50] [--per-flush 50] [--completions 64] [--step-seconds 2.166]
"""

from __future__ import annotations

import argparse
import json
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


def _steps(first: int, steps: int, completions: int) -> list[tuple[str, list[dict], dict[str, str]]]:
    from hackable_rl.tracking.traces import step_trace_name

    return [(step_trace_name(step), [_row(index, step) for index in range(completions)],
             {"run_name": "bench", "step": str(step)}) for step in range(first, first + steps)]


def _per_step(write, traces: list, per_flush: int) -> float:
    """Seconds per step of `write(traces)`, `per_flush` steps a call."""
    started = time.perf_counter()
    for first in range(0, len(traces), per_flush):
        write(traces[first : first + per_flush])
    return (time.perf_counter() - started) / len(traces)


def write_with_span_rows(client, run_id: str, traces: list) -> None:
    """The baseline: the same trace rows, and every span a row of the store's span table."""
    from mlflow.entities.span import Span
    from mlflow.tracing.client import TracingClient

    from hackable_rl.tracking.traces import step_trace

    experiment_id = client.get_run(run_id).info.experiment_id
    tracing = TracingClient(client.tracking_uri)
    now_ms = int(time.time() * 1000)
    built = [step_trace(run_id, experiment_id, name, rows, tags, now_ms) for name, rows, tags in traces]
    tracing.delete_traces(experiment_id, trace_ids=[info.trace_id for info, _ in built])
    for info, _ in built:  # the trace rows first: spans of a trace the store holds only add rows
        tracing.start_trace(info)
    tracing.log_spans(experiment_id, [Span.from_dict(span) for _, spans in built for span in spans])


def time_completion_traces(client, run_id: str, completions: int) -> float:
    """One step as one trace per completion (its span, two assessments), spans stored as the project does."""
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.tracing.client import TracingClient
    from mlflow.tracing.utils.artifact_utils import get_artifact_uri_for_trace

    from hackable_rl.tracking.trace_store import _upload_spans
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
        _upload_spans(get_artifact_uri_for_trace(tracing.start_trace(info)), json.dumps({"spans": spans}))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--per-flush", type=int, default=50, help="steps a flush sends: the main job checkpoints every 50")
    parser.add_argument("--step-seconds", type=float, default=MAIN_JOB_STEP_SECONDS)
    args = parser.parse_args()
    from mlflow import MlflowClient

    from hackable_rl.tracking.traces import write_traces

    with tempfile.TemporaryDirectory() as scratch:
        client = MlflowClient(f"sqlite:///{Path(scratch) / 'mlflow.db'}")
        experiment = client.create_experiment("bench", artifact_location=(Path(scratch) / "artifacts").as_uri())
        run_id = client.create_run(experiment).info.run_id
        project = lambda traces: write_traces(client, run_id, traces)  # noqa: E731
        span_rows = lambda traces: write_with_span_rows(client, run_id, traces)  # noqa: E731
        for write in (project, span_rows):  # warm-up: imports, the first queries
            _per_step(write, _steps(10_000, 1, args.completions), 1)
        timed = {"project": _per_step(project, _steps(1, args.steps, args.completions), args.per_flush),
                 "span rows": _per_step(span_rows, _steps(1_000, args.steps, args.completions), args.per_flush)}
        per_completion = time_completion_traces(client, run_id, args.completions)
    share = lambda seconds: f"{seconds * 1000:.0f} ms per step, {seconds / args.step_seconds:.1%} of a {args.step_seconds} s training step"  # noqa: E731
    print(f"{args.steps} steps of {args.completions} completions, {args.per_flush} steps a flush:")
    print(f"  one trace per step, spans in one file per trace (the project): {share(timed['project'])}")
    print(f"  one trace per step, spans as rows of the store's span table:  {share(timed['span rows'])}")
    print(f"  one trace per completion (+2 assessments):                   {share(per_completion)}")
    print(f"ratio span rows / project: {timed['span rows'] / timed['project']:.2f}")


if __name__ == "__main__":
    main()
