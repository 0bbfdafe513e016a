"""A shaping variant is one file (tests/plugins/shaping_plugin.py): the scoring pipeline optimises it
with its own validated settings, and the records keep the robust shaping beside it under the same
settings, as they do for `robust`."""

from __future__ import annotations

from pathlib import Path

import pytest

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.scoring.pipeline import build_reward_pipeline

PLUGINS = Path(__file__).parent / "plugins"
MEMBERS = [{"name": "a", "corrupted": True}, {"name": "b", "corrupted": False}, {"name": "c", "corrupted": False}]
COMPLETIONS = ["<think>5+7=12</think> \\boxed{12}", "<think>5+7=13</think> \\boxed{13}",
               "<think>2+2=4</think> \\boxed{4}", "no answer"]
COLUMNS = dict(prompts=["p"] * 4, ids=["q0", "q1", "q2", "q3"], references=["12", "12", "4", "4"],
               metadata=[{}, {}, {}, {}])


def _records(method: str, **kwargs):
    config = ExperimentConfig.model_validate({
        "method": method, "method_kwargs": kwargs, "verifier": {"members": MEMBERS},
        "corruption": {"channel": "flip", "rate": 0.5}, "objective": {"rewards": ["correctness_reward"]},
    })
    return build_reward_pipeline(config).score(COMPLETIONS, **COLUMNS).records


def test_a_squared_disagreement_penalty_is_one_plugin_file(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    settings = {"disagreement_lambda": 0.8, "attenuation": "none", "confidence_weighting": False}
    variant, robust = _records("shaping_plugin:squared_penalty", **settings), _records("robust", **settings)
    assert any(record.disagreement["U"] > 0 for record in variant)  # the flip makes members disagree
    for mine, theirs in zip(variant, robust, strict=True):
        u = mine.disagreement["U"]
        assert mine.optimised_reward == pytest.approx(mine.reward - 0.8 * u**2)  # its own shaping, its settings
        assert theirs.optimised_reward == pytest.approx(theirs.reward - 0.8 * u)
        assert mine.shaped == pytest.approx(theirs.shaped)  # the records' robust column, same settings


def test_its_settings_are_validated_as_robusts_are(monkeypatch) -> None:
    from pydantic import ValidationError

    monkeypatch.syspath_prepend(str(PLUGINS))
    with pytest.raises((ValidationError, ValueError), match="disagreement_lamda"):
        _records("shaping_plugin:squared_penalty", disagreement_lamda=0.8)
