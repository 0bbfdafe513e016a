"""The capability gate before GRPO on a pretrained policy: which split, when it refuses, what it records."""

from __future__ import annotations

import json
import os

import pytest

from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.extensions import load_resolved
from hackable_rl.training import capability
from hackable_rl.training.capability import CapabilityResult, check_capability, gate_split, measure_capability


def _config(tmp_path, **sections):
    raw = {
        "storage": {"cache_dir": str(tmp_path / "cache")},
        "tracking": {"enabled": False},
        "data": {"name": "probe"},
        "model": {"source": "smollm2-135m-instruct"},
        **sections,
    }
    return validate_config(raw)


def _result(pass_at_k: float | None, forced: bool = False) -> CapabilityResult:
    return CapabilityResult(
        split="validation", prompts=64, k=8, pass_at_1=None if pass_at_k is None else pass_at_k / 4,
        pass_at_k=pass_at_k, mixed_groups=pass_at_k, min_pass_at_k=0.05,
        passed=pass_at_k is not None and pass_at_k >= 0.05, forced=forced, seconds=1.0,
    )


@pytest.fixture
def measured(monkeypatch):
    """check_capability with the measurement replaced: `measured.value` is the pass@k it reports."""

    class Fake:
        value: float | None = 0.0
        calls = 0

    def fake_measure(config, model, tokenizer):
        Fake.calls += 1
        return _result(Fake.value, forced=config.capability.force)

    monkeypatch.setattr(capability, "measure_capability", fake_measure)
    return Fake


def test_gate_measures_the_validation_split_and_never_test(tmp_path):
    config = _config(tmp_path)
    folder = tmp_path / "cache" / "datasets" / "probe"
    write_jsonl(folder / "test.jsonl", [{"id": "t"}])
    with pytest.raises(UserError, match="validation.jsonl or eval.jsonl"):
        gate_split(config)
    write_jsonl(folder / "eval.jsonl", [{"id": "e"}])
    assert gate_split(config) == ("eval", folder / "eval.jsonl")  # data prepared before validation splits
    write_jsonl(folder / "validation.jsonl", [{"id": "v"}])
    assert gate_split(config) == ("validation", folder / "validation.jsonl")


def test_hopeless_policy_is_refused_with_one_line(tmp_path, measured):
    measured.value = 0.0
    with pytest.raises(UserError) as refused:
        check_capability(_config(tmp_path), None, None, tmp_path)
    (line,) = refused.value.problems
    assert "\n" not in line
    assert "pass@8 0.000 on 64 validation prompts" in line and "capability.min_pass_at_k 0.05" in line
    assert "data.provider: arith" in line and "capability.force=true" in line
    assert json.loads((tmp_path / "capability.json").read_text())["passed"] is False  # recorded anyway


def test_forced_gate_trains_and_records(tmp_path, measured):
    measured.value = 0.0
    record = check_capability(_config(tmp_path, capability={"force": True}), None, None, tmp_path)
    assert record["forced"] is True and record["passed"] is False
    assert record == json.loads((tmp_path / "capability.json").read_text())


def test_capable_policy_passes_and_a_resumed_run_reuses_the_record(tmp_path, measured):
    measured.value = 0.4
    first = check_capability(_config(tmp_path), None, None, tmp_path)
    assert first["passed"] is True and measured.calls == 1
    assert check_capability(_config(tmp_path), None, None, tmp_path) == first
    assert measured.calls == 1


def test_tiny_model_and_disabled_gate_are_not_measured(tmp_path, measured):
    assert check_capability(_config(tmp_path, model={"source": "tiny"}), None, None, tmp_path) is None
    assert check_capability(_config(tmp_path, capability={"enabled": False}), None, None, tmp_path) is None
    assert measured.calls == 0 and not (tmp_path / "capability.json").exists()


def test_measurement_on_the_tiny_policy(tiny_project):
    """The sampling and judging path itself, on the seconds-scale tiny policy."""
    from hackable_rl.models.loading import load_policy

    previous = os.getcwd()
    os.chdir(tiny_project)
    try:
        config = load_resolved("params.yaml", ["tracking.enabled=false", "capability.prompts=3", "capability.k=2"])
        model, tokenizer = load_policy(config)
        result = measure_capability(config, model, tokenizer)
    finally:
        os.chdir(previous)
    assert (result.split, result.prompts, result.k) == ("validation", 3, 2)
    assert 0.0 <= result.pass_at_1 <= result.pass_at_k <= 1.0
    assert result.passed == (result.pass_at_k >= 0.05)


def test_pretrained_sft_warm_start_then_gated_training(tiny_project, tmp_path, monkeypatch):
    """`warmstart.pretrained_sft` on a pretrained source (here a local folder holding the tiny policy):
    the warm start saves a safetensors folder, training starts from it and records the gate."""
    import shutil

    from hackable_rl.models.loading import policy_dir, resolve_policy
    from hackable_rl.training.run import run_training
    from hackable_rl.warmstart import run_warmstart

    project = tmp_path / "project"
    shutil.copytree(tiny_project, project)
    monkeypatch.chdir(project)
    source = project / "cache" / "models" / "tiny-arith-w0"
    config = load_resolved(
        "params.yaml",
        [
            "tracking.enabled=false", f"model.source={source}", "warmstart.pretrained_sft=true",
            "warmstart.steps=2", "warmstart.batch_size=4", "capability.prompts=2", "capability.k=2",
            "capability.force=true", "trainer.max_steps=1", "trainer.save_steps=1", "trainer.permanent_steps=[]",
        ],
    )
    metrics = run_warmstart(config, project / "metrics" / "warmstart.json")
    warm = policy_dir(config)
    assert metrics["trained"] is True and metrics["steps"] == 2
    assert (warm / "model.safetensors").exists() and (warm / "reference.json").exists()
    assert resolve_policy(config).location == str(warm)

    result = run_training(config)
    info = json.loads((result.run_dir / "run.json").read_text())
    assert result.final_step == 1
    assert info["base_model"] == f"local:{warm}"
    assert info["capability"]["k"] == 2 and info["capability"]["forced"] is True
