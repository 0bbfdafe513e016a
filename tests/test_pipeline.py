"""Pipeline smoke: `dvc repro` of a seconds-scale params file in a temporary Git repository, then
`dvc exp run -S corruption.rate=...`, checking every stage's outputs and the MLflow runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(command: list[str], cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _make_repo(folder: Path, write_params) -> Path:
    folder.mkdir()
    shutil.copy(REPO / "dvc.yaml", folder / "dvc.yaml")
    shutil.copytree(REPO / "src", folder / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".gitignore", folder / ".gitignore")
    write_params(folder, {"trainer.max_steps": 2, "trainer.permanent_steps": [1]})
    _run(["git", "init", "-q"], folder)
    _run(["git", "config", "user.email", "ci@example.com"], folder)
    _run(["git", "config", "user.name", "ci"], folder)
    _run(["dvc", "init", "-q"], folder)
    _run(["git", "add", "-A"], folder)
    _run(["git", "commit", "-qm", "pipeline smoke"], folder)
    return folder


@pytest.mark.slow  # three replicates of every stage: a few minutes on 2 cores (make test-slow, CI)
def test_dvc_repro_and_exp_run(tmp_path, tiny_params_writer):
    repo = _make_repo(tmp_path / "repo", tiny_params_writer)
    _run(["dvc", "repro"], repo)

    assert (repo / "cache/datasets/arith/manifest.json").exists()
    for split in ("train", "validation", "test", "sft"):
        assert (repo / f"cache/datasets/arith/{split}.jsonl").exists(), split
    for seed in (0, 1, 2):  # three replicates, each a whole pipeline seed: its own warm start first
        assert (repo / f"cache/models/tiny-arith-w{seed}/model.safetensors").exists()
        for name in (f"warmstart/s{seed}/warmstart.json", f"base/s{seed}/eval.json", f"base/s{seed}/prompts.jsonl"):
            assert (repo / "metrics" / name).exists(), name
        run_dir = repo / f"cache/artifacts/runs/baseline-flip-r0.2-s{seed}"
        assert (run_dir / "generations/step-00002.jsonl").exists()
        assert (run_dir / "checkpoints/permanent/step-1/model.safetensors").exists()
        assert (repo / f"cache/artifacts/eval/trained/s{seed}/generations.jsonl").exists()
        clean_dir = repo / f"cache/artifacts/clean-runs/baseline-flip-r0-s{seed}"  # the clean reference
        assert all(record["member.m0.reward"] == record["member.m0.clean_reward"]
                   for record in map(json.loads, (clean_dir / "generations/step-00002.jsonl").open()))
        for policy in ("clean", "trained"):
            for name in ("train.json", "eval.json", "prompts.jsonl", "train_curve.csv"):
                assert (repo / "metrics" / policy / f"s{seed}" / name).exists(), (policy, seed, name)
    assert (repo / "reports/report.md").exists()
    headline = json.loads((repo / "metrics/headline.json").read_text())  # what `dvc exp show` lists
    assert headline["condition"] == "baseline-flip-r0.2" and headline["seeds"] == "0,1,2"
    assert headline["ci_low"] <= headline["pass@1"] <= headline["ci_high"]
    evaluated = json.loads((repo / "metrics/trained/s0/eval.json").read_text())
    assert evaluated["n_prompts"] == 4 and evaluated["split"] == "test"
    compared = json.loads((repo / "metrics/compare.json").read_text())
    for name in ("clean_vs_base", "trained_vs_base", "trained_vs_clean"):
        entry = compared[name]
        assert entry["metric"] == "pass_at_1" and entry["n_prompts"] == 4 and entry["n_replicates"] == 3
        assert len(entry["per_replicate"]) == 3 and entry["interval_method"].startswith("t-interval")
        assert entry["ci_low"] <= entry["diff"] <= entry["ci_high"]
        assert entry["family"] and (entry["p_holm"] is None) == (entry["p_value"] is None)

    client = MlflowClient(f"sqlite:///{repo / 'cache/mlflow/mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    kinds = sorted(run.data.tags["hackable_rl.kind"] for run in runs)
    assert kinds == ["eval"] * 3 + ["train"] * 6 + ["warmstart"] * 3
    trained = next(run for run in runs if run.data.tags["hackable_rl.kind"] == "train"
                   and run.data.tags["corruption.rate"] == "0.2")
    assert "Headline/eval_pass_at_1" in trained.data.metrics
    assert client.search_model_versions("name='tests-policy-corrupted'")
    assert client.search_model_versions("name='tests-policy-clean'")

    _run(["git", "add", "-A"], repo)
    _run(["git", "commit", "-qm", "baseline"], repo)
    output = _run(["dvc", "exp", "run", "-S", "corruption.rate=0.4"], repo)
    for unchanged in ("prepare", "warmstart", "train_clean", "evaluate_clean"):
        assert f"Stage '{unchanged}' didn't change, skipping" in output, unchanged
    rerun = json.loads((repo / "cache/artifacts/runs/baseline-flip-r0.4-s1/run.json").read_text())
    assert rerun["corruption_rate"] == 0.4
    assert yaml.safe_load((repo / "params.yaml").read_text())["corruption"]["rate"] == 0.4
    shown = json.loads(_run(["dvc", "exp", "show", "--json"], repo))
    assert "0.4" in json.dumps(shown)
    rows = [shown[0], *(rev for exp in shown[1]["experiments"] for rev in exp["revs"])]  # workspace, baseline, exp
    metrics = [row["data"]["metrics"] for row in rows]
    assert all(list(m) == ["metrics/headline.json"] for m in metrics)  # the only metric, in every row
    assert metrics[-1]["metrics/headline.json"]["data"]["condition"] == "baseline-flip-r0.4"
    rates = {run.data.tags.get("corruption.rate") for run in client.search_runs(
        [client.get_experiment_by_name("tests").experiment_id], "tags.`hackable_rl.kind` = 'train'")}
    assert rates == {"0.0", "0.2", "0.4"}
