"""Judge any table of completions inside MLflow's evaluation harness with the project's judges and a
noisy training verifier (`hackable_rl.tracking.scorers`), then select the paid-but-wrong rows by their
assessments. Another system's outputs work the same: a JSONL with id, prompt, completion and reference.

    python examples/mlflow_scorers.py [rows.jsonl] [--config params.yaml] [--set corruption.rate=0.4]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlflow

from hackable_rl.config.loading import load_config
from hackable_rl.tracking.scorers import judge_scorer, transferred_judge_scorer, verifier_scorer

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", nargs="?", type=Path, default=HERE / "data" / "scorer_rows.jsonl")
    parser.add_argument("--config", type=Path, default=HERE.parent / "params.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=["corruption.rate=0.4"])
    options = parser.parse_args()
    rows = [json.loads(line) for line in options.rows.read_text().splitlines() if line.strip()]
    table = [{"inputs": {"id": row["id"], "prompt": row["prompt"]}, "outputs": row["completion"],
              "expectations": {"reference": row["reference"]}} for row in rows]
    verifier = verifier_scorer(load_config(options.config, options.overrides))
    result = mlflow.genai.evaluate(data=table, scorers=[judge_scorer(), transferred_judge_scorer(), verifier])
    print({name: round(float(value), 3) for name, value in result.metrics.items()})

    # the rows the verifier paid (any pay) that the judge calls wrong, selected by their assessments
    traces = mlflow.search_traces(run_id=result.run_id)
    for request, assessments in zip(traces["request"], traces["assessments"], strict=True):
        verdicts = {a["assessment_name"]: a.get("feedback", {}).get("value") for a in assessments}
        if verdicts.get("judge") is False and (verdicts.get("verifier") or 0) > 0:
            print("paid but wrong:", json.loads(request) if isinstance(request, str) else request)


if __name__ == "__main__":
    main()
