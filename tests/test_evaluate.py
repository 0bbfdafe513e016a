"""`hackable-rl eval` end to end on a tiny-model run: run lookup in MLflow, checkpoint loading,
judge + training verifier on the same samples, MLflow logging, promotion, learning curves."""

from __future__ import annotations

import json

from mlflow import MlflowClient
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config import load_config
from hackable_rl.jsonl import read_jsonl
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.training.run import run_training


def test_eval_run_id_promote_and_learning_curve(project):
    config = load_config("params.yaml")
    trained = run_training(config)
    runner = CliRunner()

    refused = runner.invoke(app, ["promote", "--run-id", trained.run_id, "--alias", "champion"])
    assert refused.exit_code == 2 and "no independent evaluation" in refused.output

    result = runner.invoke(app, ["eval", "--run-id", trained.run_id])
    assert result.exit_code == 0, result.output
    out = project / "cache/artifacts/eval/baseline-flip-r0.2-s0/step-3"
    records = read_jsonl(out / "generations.jsonl")
    assert len(records) == 4 * 2  # max_prompts x n
    for record in records:
        # one naming scheme with the training records: the judge's correct/parsed/reason, the training
        # verifier's reward (its aggregate r, the gap is measured on the same samples) and detail beside it
        fields = {"prompt_id", "completion", "correct", "parsed", "reason", "reward", "optimised_reward", "U",
                  "member.m0.reward", "strict", "thinking_tokens", "transfer_correct", "transfer_parsed"}
        assert fields <= set(record), fields - set(record)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["step"] == 3 and metrics["n_samples"] == 8
    assert json.loads((project / "metrics/eval.json").read_text())["n_prompts"] == 4

    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    assert "eval/pass_at_1" in client.get_run(trained.run_id).data.metrics
    promoted = runner.invoke(app, ["promote", "--run-id", trained.run_id, "--alias", "champion"])
    assert promoted.exit_code == 0, promoted.output
    assert client.get_model_version_by_alias("tests-policy", "champion").tags["step"] == "3"

    curve = runner.invoke(app, ["eval", "--run-id", trained.run_id, "--all-steps"])
    assert curve.exit_code == 0, curve.output
    table = (project / "cache/artifacts/eval/baseline-flip-r0.2-s0/learning_curve.csv").read_text().splitlines()
    assert len(table) == 3  # header + steps 2 and 3


def test_eval_base_writes_the_zero_shot_file_the_utilisation_reward_reads(project):
    zero_shot = project / "zero_shot.jsonl"
    result = CliRunner().invoke(
        app, ["eval", "--base", "--set", "tracking.enabled=false", "--set", f"evaluation.zero_shot_out={zero_shot}"]
    )
    assert result.exit_code == 0, result.output
    rows = read_jsonl(zero_shot)
    assert len(rows) == 4 and all(row["correct"] in (0, 1) for row in rows)

    from hackable_rl.rewards.functions import token_utilisation_reward

    scores = token_utilisation_reward(
        ["<think>1+1=2</think> \\boxed{2}"], id=[rows[0]["id"]], zero_shot_path=str(zero_shot), correctness=[1.0]
    )
    assert len(scores) == 1 and scores[0] is not None


def test_eval_of_an_unknown_run_is_a_user_error(project):
    result = CliRunner().invoke(app, ["eval", "--run-id", "0123456789abcdef"])
    assert result.exit_code == 2
    assert "no such run" in result.output
