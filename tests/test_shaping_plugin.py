"""A shaping variant is one file (tests/plugins/shaping_plugin.py): the scoring pipeline optimises it
with its own validated settings, and it keeps every setting of the robust shaping it does not change:
each one set alone (conservative aggregation included) moves it as it moves `robust`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.reward.pipeline import build_reward_pipeline

PLUGINS = Path(__file__).parent / "plugins"
MEMBERS = [{"name": "a", "corrupted": True}, {"name": "b", "corrupted": False}, {"name": "c", "corrupted": False}]
COMPLETIONS = ["<think>5+7=12</think> \\boxed{12}", "<think>5+7=13</think> \\boxed{13}",
               "<think>2+2=4</think> \\boxed{4}", "no answer"]
COLUMNS = dict(prompts=["p"] * 4, ids=["q0", "q1", "q2", "q3"], references=["12", "12", "4", "4"],
               metadata=[{}, {}, {}, {}])
SETTINGS = [
    {},
    {"confidence_weighting": False},
    {"disagreement_penalty": False},
    {"disagreement_lambda": 0.8},
    {"conservative_aggregation": True},
    {"attenuation": "none"},
    {"attenuation": "exp", "attenuation_k": 2.0},
]
"""Each of the robust shaping's settings set alone (ShapingSettings' defaults otherwise)."""


def _records(method: str, **kwargs):
    config = ExperimentConfig.model_validate({
        "method": method, "method_kwargs": kwargs, "verifier": {"members": MEMBERS},
        "corruption": {"channel": "flip", "rate": 0.5}, "objective": {"rewards": ["correctness_reward"]},
    })
    return build_reward_pipeline(config).score(COMPLETIONS, **COLUMNS).records


def _by_hand(record, power: int, confidence_weighting: bool = True, disagreement_penalty: bool = True,
             disagreement_lambda: float = 0.5, conservative_aggregation: bool = False, attenuation: str = "linear",
             attenuation_k: float = 1.0) -> float:
    """attenuation(U) * (r * confidence - lambda * U**power), r the members' min under conservative
    aggregation, else the record's aggregate (the mean)."""
    u = record.disagreement["U"]
    r = min(verdict.reward for verdict in record.seen) if conservative_aggregation else record.reward
    confidence = record.disagreement["mean_confidence"] if confidence_weighting else 1.0
    penalty = disagreement_lambda * u**power if disagreement_penalty else 0.0
    scale = {"none": 1.0, "linear": 1.0 - u, "exp": math.exp(-attenuation_k * u)}[attenuation]
    return scale * (r * confidence - penalty)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults")
def test_the_variant_keeps_every_other_setting(monkeypatch, settings: dict) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    variant, robust = _records("shaping_plugin:squared_penalty", **settings), _records("robust", **settings)
    assert any(0 < record.disagreement["U"] < 1 for record in variant)  # U**2 differs from U there
    assert any(min(v.reward for v in r.seen) < r.reward for r in variant)  # min differs from the mean there
    for mine, theirs in zip(variant, robust, strict=True):
        assert mine.optimised_reward == pytest.approx(_by_hand(mine, 2, **settings))  # its own penalty
        assert theirs.optimised_reward == pytest.approx(_by_hand(theirs, 1, **settings))  # robust's, same settings


def test_its_settings_are_validated_as_robusts_are(monkeypatch) -> None:
    from pydantic import ValidationError

    monkeypatch.syspath_prepend(str(PLUGINS))
    with pytest.raises((ValidationError, ValueError), match="disagreement_lamda"):
        _records("shaping_plugin:squared_penalty", disagreement_lamda=0.8)
