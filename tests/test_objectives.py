"""Both objective modes, with and without the strict-format gate, on hand-computed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from hackable_rl.config.experiment import ObjectiveConfig
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import OBJECTIVES
from hackable_rl.reward.objectives import LatentNeuraleseObjective, TokenGRPOObjective, build_objective
from hackable_rl.reward.pipeline import build_reward_pipeline

PLUGINS = Path(__file__).parent / "plugins"
# Four completions: right+strict+short, right+strict+long, wrong+strict, not strict.
COMPONENTS = {
    "correctness_reward": [1.0, 1.0, 0.0, 0.0],
    "format_tag_reward": [1.0, 1.0, 1.0, 0.0],
    "length_penalty_reward": [0.75, 0.25, 0.5, 0.0],
    "token_utilisation_reward": [-0.5, 0.0, 0.0, 0.0],
}


def test_registered() -> None:
    assert OBJECTIVES.get("token_grpo") is TokenGRPOObjective
    assert OBJECTIVES.get("latent_neuralese") is LatentNeuraleseObjective


def test_additive_sums_enabled_rewards() -> None:
    objective = TokenGRPOObjective(ObjectiveConfig(rewards=["format_tag_reward", "correctness_reward"]))
    assert objective.reward_names() == ["format_tag_reward", "correctness_reward"]
    assert objective.combine(COMPONENTS) == [2.0, 2.0, 1.0, 0.0]


def test_additive_with_gate() -> None:
    objective = TokenGRPOObjective(ObjectiveConfig(rewards=["correctness_reward"], strict_format_gate=True))
    assert objective.reward_names() == ["correctness_reward", "format_tag_reward"]
    assert objective.combine(COMPONENTS) == [1.0, 1.0, 0.0, -1.0]


def test_weighted_length_penalty_hand_computed() -> None:
    config = ObjectiveConfig(
        mode="weighted_length_penalty", correctness_weight=2.0, length_penalty_lambda=0.5
    )
    objective = TokenGRPOObjective(config)
    assert objective.reward_names() == ["correctness_reward", "format_tag_reward", "length_penalty_reward"]
    # 2 r_c + 0.5 r_c r_l + r_f
    assert objective.combine(COMPONENTS) == pytest.approx([3.375, 3.125, 1.0, 0.0])


def test_weighted_length_penalty_with_format_interaction_and_gate() -> None:
    config = ObjectiveConfig(
        mode="weighted_length_penalty",
        length_penalty_lambda=1.0,
        length_penalty_interaction="correctness_length_format",
        strict_format_gate=True,
        non_strict_penalty=-2.0,
    )
    components = {
        **COMPONENTS,
        "format_tag_reward": [1.0, 0.0, 1.0, 0.0],
        "correctness_reward": [1.0, 1.0, 0.0, 1.0],
    }
    # r_c + r_c r_l r_f + r_f; the 2nd and 4th fail the gate.
    assert TokenGRPOObjective(config).combine(components) == pytest.approx([2.75, -2.0, 1.0, -2.0])


def test_weighted_length_penalty_adds_utilisation_when_enabled() -> None:
    config = ObjectiveConfig(
        mode="weighted_length_penalty", rewards=["correctness_reward", "token_utilisation_reward"]
    )
    objective = TokenGRPOObjective(config)
    assert "token_utilisation_reward" in objective.reward_names()
    assert objective.combine(COMPONENTS) == pytest.approx([1.5, 2.0, 1.0, 0.0])


def test_combine_rejects_missing_components_and_none() -> None:
    objective = TokenGRPOObjective(ObjectiveConfig())
    with pytest.raises(ValueError, match="needs components"):
        objective.combine({"format_tag_reward": [1.0]})
    with pytest.raises(ValueError, match="impute"):
        objective.combine({"format_tag_reward": [1.0], "correctness_reward": [None]})


def test_latent_neuralese_extra_reward_is_the_intentional_no_op() -> None:
    objective = LatentNeuraleseObjective(ObjectiveConfig())
    assert objective.extra_reward(["a", "b"]) == [0.0, 0.0]
    assert objective.combine(COMPONENTS, completions=["a", "b", "c", "d"]) == [2.0, 2.0, 1.0, 0.0]

    class Bonus(LatentNeuraleseObjective):
        def extra_reward(self, completions, **columns):
            return [0.5] * len(completions)

    assert Bonus(ObjectiveConfig()).combine(COMPONENTS, completions=["a"] * 4) == [2.5, 2.5, 1.5, 0.5]


def test_build_objective_by_name_and_class_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(
        build_objective(validate_config({"objective": {"name": "latent_neuralese"}})),
        LatentNeuraleseObjective,
    )
    monkeypatch.syspath_prepend(str(PLUGINS))
    config = validate_config(
        {"objective": {"class_path": "my_plugin:DoubleCorrectness"}, "corruption": {"channel": "none"}}
    )
    objective = build_objective(config)
    assert type(objective).__name__ == "DoubleCorrectness"
    batch = build_reward_pipeline(config).score(
        ["<think>t</think> \\boxed{7}", "<think>t</think> \\boxed{8}"],
        ["p", "p"],
        ["q", "q"],
        ["7", "7"],
        [{}, {}],
    )
    assert batch.rewards == [2.0, 0.0]


def test_build_objective_errors_name_the_field() -> None:
    with pytest.raises(UserError, match="objective.name: unknown objective 'nope'"):
        build_objective(validate_config({"objective": {"name": "nope"}}))
    with pytest.raises(UserError, match="objective.class_path: 'no_such_module:X'"):
        build_objective(validate_config({"objective": {"class_path": "no_such_module:X"}}))
