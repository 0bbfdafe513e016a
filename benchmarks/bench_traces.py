"""What MLflow 3 traces would cost as the home of generation records, on the embedded SQLite store.

One trace per completion (prompt in, completion out) with two assessments (the training verifier's
reward and the independent judge's verdict), against the tables the project logs instead (one JSON
table per block of 50 steps). Prints seconds per completion and store bytes per completion of each,
and what a study (45 conditions x 200 steps x 32 completions) would add.

    python benchmarks/bench_traces.py [--completions 200] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

STUDY_COMPLETIONS = 45 * 200 * 32


def _record(index: int) -> dict:
    return {
        "step": index // 32 + 1, "prompt_id": f"p{index}", "prompt": "Solve: Tom has 3 apples and buys 4. " * 3,
        "completion": "<think>3+4=7</think> \\boxed{7}", "reward": 1.0, "correct": True, "reason": "equal",
    }


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def time_traces(workdir: Path, completions: int) -> tuple[float, int]:
    # Synchronous export: an assessment needs its trace stored, and the time is then all counted.
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import AssessmentSource

    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'traces.db'}")
    experiment = mlflow.create_experiment("traces", artifact_location=(workdir / "trace-artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment)
    source = AssessmentSource(source_type="CODE", source_id="hackable-rl")
    with mlflow.start_run():
        before = _folder_bytes(workdir)
        started = time.perf_counter()
        for index in range(completions):
            record = _record(index)
            with mlflow.start_span(name="generation") as span:
                span.set_inputs({"prompt": record["prompt"], "step": record["step"]})
                span.set_outputs({"completion": record["completion"]})
            trace_id = mlflow.get_last_active_trace_id()
            mlflow.log_feedback(trace_id=trace_id, name="verifier", value=record["reward"], source=source)
            mlflow.log_feedback(trace_id=trace_id, name="judge", value=record["correct"], source=source)
        seconds = time.perf_counter() - started
    return seconds, _folder_bytes(workdir) - before


def time_tables(workdir: Path, completions: int) -> tuple[float, int]:
    from mlflow import MlflowClient

    from hackable_rl.tracking.tables import write_table

    client = MlflowClient(f"sqlite:///{workdir / 'tables.db'}")
    experiment = client.create_experiment("tables", artifact_location=(workdir / "table-artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    rows = [_record(index) for index in range(completions)]
    before = _folder_bytes(workdir)
    started = time.perf_counter()
    write_table(client, run_id, rows, "generations/steps-00001-00050.json", keep_other_steps=False)
    seconds = time.perf_counter() - started
    return seconds, _folder_bytes(workdir) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        for name, measure in (("traces + 2 assessments", time_traces), ("one block table", time_tables)):
            seconds, size = measure(workdir, args.completions)
            per = seconds / args.completions
            print(
                f"{name}: {per * 1000:.2f} ms and {size / args.completions:.0f} bytes per completion; "
                f"a study ({STUDY_COMPLETIONS:,} completions): {per * STUDY_COMPLETIONS / 60:.1f} min, "
                f"{size / args.completions * STUDY_COMPLETIONS / 1e6:.0f} MB"
            )


if __name__ == "__main__":
    main()
