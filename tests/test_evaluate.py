"""`hackable-rl eval` end to end on a tiny-model run: run lookup in MLflow, checkpoint loading,
judge + training verifier on the same samples, MLflow logging, registration of what was evaluated
(and nothing else), promotion, learning curves."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow import MlflowClient
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.training.run import run_training


def _versions(client: MlflowClient, run_id: str) -> dict[int, object]:
    """Step -> the run's registry version of that checkpoint (a step registered twice fails here)."""
    versions = client.search_model_versions(f"run_id = '{run_id}'")
    steps = [int(v.tags["step"]) for v in versions]
    assert len(steps) == len(set(steps)), steps
    return dict(zip(steps, versions, strict=True))


def test_eval_run_id_promote_and_learning_curve(project):
    config = load_resolved("params.yaml")
    trained = run_training(config)
    runner = CliRunner()
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    assert _versions(client, trained.run_id) == {}  # training registers nothing

    refused = runner.invoke(app, ["promote", "--run-id", trained.run_id, "--alias", "champion"])
    assert refused.exit_code == 2 and "no independent evaluation" in refused.output
    assert f"run `hackable-rl eval --run-id {trained.run_id} --step 3` first" in refused.output
    assert len(refused.output.strip().splitlines()) == 1, refused.output

    before = client.get_run(trained.run_id).info
    result = runner.invoke(app, ["eval", "--run-id", trained.run_id])
    assert result.exit_code == 0, result.output
    after = client.get_run(trained.run_id)
    # logged into the training run, which stays as training left it (no reopening, no new end time)
    assert (after.info.status, after.info.end_time) == (before.status, before.end_time) == ("FINISHED", before.end_time)
    assert {"Headline/eval_pass_at_1", "Headline/eval_hacking_gap"} <= set(after.data.metrics)  # the runs table's columns
    assert not any(key.startswith(("eval", "final/", "Headline/eval")) for key in set(after.data.metrics) - {"Headline/eval_pass_at_1", "Headline/eval_hacking_gap"})
    assert "### Evaluation, step-3" in after.data.tags["mlflow.note.content"]
    assert "### Training" in after.data.tags["mlflow.note.content"]
    listed = {entry["path"] for entry in json.loads(after.data.tags["mlflow.loggedArtifacts"])}
    assert "eval/samples.json" in listed
    # the evaluated checkpoint, and it alone, is a version now: its eval tags, relative paths only
    [(step, version)] = _versions(client, trained.run_id).items()
    assert step == 3 and version.name == "tests-policy-corrupted"
    assert version.source.endswith("/checkpoints/permanent/step-3")
    assert version.tags["independent_eval"] == "eval/step-3/metrics.json" and "eval.pass_at_1" in version.tags
    assert version.tags["run_id"] == trained.run_id and version.tags["condition"] == "corrupted"
    assert version.description.startswith("Step 3 of run baseline-flip-r0.2-s0") and "pass_at_1" in version.description
    assert str(project) not in version.description + json.dumps(version.tags)
    best = client.get_model_version_by_alias("tests-policy-corrupted", "best-corrupted")
    assert best.version == version.version
    # the samples as traces beside the training steps': sampled and greedy, a span per sample
    found = client.search_traces(locations=[after.info.experiment_id], run_id=trained.run_id)
    traces = {t.info.tags["mlflow.traceName"]: t for t in found}
    assert {"eval step-3", "eval step-3 greedy", "step 00003"} <= set(traces)
    assert len(traces["eval step-3"].data.spans) == 1 + 4 * 2
    # each sample a trace of its own, its verdicts as assessments (tracking/assessments.py), as training's
    sample = traces["eval step-3 #0"].info
    assert {"judge", "verifier", "verifier_paid", "verifier.m0", "reference"} <= {a.name for a in sample.assessments}
    assert (sample.tags["group"], sample.tags["decoding"]) == ("eval step-3", "sampled")
    assert traces["eval step-3 greedy #0"].info.tags["decoding"] == "greedy"
    # the same checkpoint evaluated again gives the same numbers at the same step and time: one point
    again = runner.invoke(app, ["eval", "--run-id", trained.run_id])
    assert again.exit_code == 0, again.output
    assert [p.step for p in client.get_metric_history(trained.run_id, "Headline/eval_pass_at_1")] == [3]
    assert [v.version for v in _versions(client, trained.run_id).values()] == [version.version]  # updated, not added
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
    assert not (project / "metrics/eval.json").exists()  # DVC metrics only where --metrics-dir asks

    promoted = runner.invoke(app, ["promote", "--run-id", trained.run_id, "--alias", "champion"])
    assert promoted.exit_code == 0, promoted.output
    assert client.get_model_version_by_alias("tests-policy-corrupted", "champion").tags["step"] == "3"
    # --force promotes the unevaluated step 2: registered now, without eval tags
    forced = runner.invoke(app, ["promote", "--run-id", trained.run_id, "--step", "2", "--alias", "candidate",
                                 "--force"])
    assert forced.exit_code == 0, forced.output
    unevaluated = client.get_model_version_by_alias("tests-policy-corrupted", "candidate")
    assert unevaluated.tags["step"] == "2" and "independent_eval" not in unevaluated.tags

    curve = runner.invoke(app, ["eval", "--run-id", trained.run_id, "--all-steps"])
    assert curve.exit_code == 0, curve.output
    versions = _versions(client, trained.run_id)  # step 2's version evaluated now, none added
    assert sorted(versions) == [2, 3] and versions[2].version == unevaluated.version
    assert "eval.pass_at_1" in versions[2].tags
    table = (project / "cache/artifacts/eval/baseline-flip-r0.2-s0/learning_curve.csv").read_text().splitlines()
    assert len(table) == 3  # header + steps 2 and 3
    # one samples table for every evaluated checkpoint: 4 prompts x (2 sampled + 1 greedy) per step
    path = client.download_artifacts(trained.run_id, "eval/samples.json", str(project))
    samples = json.loads(Path(path).read_text())
    steps = [row[samples["columns"].index("step")] for row in samples["data"]]
    assert sorted(steps) == [2] * 12 + [3] * 12
    assert samples["columns"][:2] == ["prompt", "completion"]  # the Evaluation view lines runs up by prompt


def test_eval_base_run_is_tagged_like_a_training_run(project):
    result = CliRunner().invoke(app, ["eval", "--base"])
    assert result.exit_code == 0, result.output
    assert not (project / "metrics/eval.json").exists()

    config = load_resolved("params.yaml")
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    experiment = client.get_experiment_by_name("tests")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI opens on runs
    [run] = client.search_runs([experiment.experiment_id], "tags.`hackable_rl.kind` = 'eval'")
    tags = run.data.tags
    # no verifier trained the base policy: no corruption labels, method and condition base, step 0
    assert (tags["method"], tags["condition"], tags["seed"], tags["step"]) == ("base", "base", "0", "0")
    assert not {"corruption.rate", "corruption.channel"} & set(tags)
    assert run.data.params["method"] == "base" and run.data.params["corruption.channel"] == "flip"
    assert "step None" not in tags["mlflow.note.content"]
    assert {"dataset_manifest_sha256", "config_hash", "model.source"} <= set(tags)
    assert [(d.dataset.name, d.tags[0].value) for d in run.inputs.dataset_inputs] == [("arith/test", "evaluation")]
    assert "eval/samples.json" in tags["mlflow.loggedArtifacts"]


def test_eval_base_writes_the_zero_shot_file_the_utilisation_reward_reads(project):
    zero_shot = project / "zero_shot.jsonl"
    result = CliRunner().invoke(
        app, ["eval", "--base", "--set", "tracking.enabled=false", "--set", f"evaluation.zero_shot_out={zero_shot}"]
    )
    assert result.exit_code == 0, result.output
    rows = read_jsonl(zero_shot)
    assert len(rows) == 4 and all(row["correct"] in (0, 1) for row in rows)

    from hackable_rl.reward.functions import token_utilisation_reward

    scores = token_utilisation_reward(
        ["<think>1+1=2</think> \\boxed{2}"], id=[rows[0]["id"]], zero_shot_path=str(zero_shot), correctness=[1.0]
    )
    assert len(scores) == 1 and scores[0] is not None


def test_eval_of_an_unknown_run_is_a_user_error(project):
    result = CliRunner().invoke(app, ["eval", "--run-id", "0123456789abcdef"])
    assert result.exit_code == 2
    assert "no such run" in result.output
