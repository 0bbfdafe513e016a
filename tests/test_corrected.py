"""`method: corrected`: the backward and forward corrections of Cai et al. 2025 on hand-computed
ensembles, their noise rates from the channel or the config, the configs they refuse, and the
forward correction's group mean kept in the advantage TRL trains on."""

from __future__ import annotations

import numpy as np
import pytest

from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import ConfigError
from hackable_rl.extensions import check_config
from hackable_rl.reward import Example
from hackable_rl.reward.methods.corrected import member_rates
from hackable_rl.reward.pipeline import build_reward_pipeline

RIGHT, WRONG = "<think>3+4=7</think> \\boxed{7}", "<think>3+4=8</think> \\boxed{8}"


def _config(**sections):
    return validate_config({"method": "corrected", **sections})


def noise_rates(config):
    """The corrupted member's rates (None when either is unknown)."""
    ((rho0, rho1),) = member_rates(config)
    return None if rho0 is None or rho1 is None else (rho0, rho1)


def test_rates_come_from_the_channel_or_the_config() -> None:
    assert noise_rates(_config(corruption={"channel": "flip", "rate": 0.2})) == (0.2, 0.2)
    asymmetric = {"channel": "asymmetric", "rate": 0.2, "kwargs": {"fn_scale": 0.5}}
    assert noise_rates(_config(corruption=asymmetric)) == (0.2, 0.1)
    assert noise_rates(_config(corruption={"channel": "none"})) == (0.0, 0.0)
    assert noise_rates(_config(corruption={"channel": "noise", "rate": 0.2})) is None
    known = _config(corruption={"channel": "noise", "rate": 0.2}, method_kwargs={"rho0": 0.1, "rho1": 0.3})
    assert noise_rates(known) == (0.1, 0.3)


def test_backward_correction_is_unbiased_per_member() -> None:
    # m0 flipped at 0.25, m1 clean: m0's observed 1 -> (1 - 0.25) / 0.5 = 1.5, observed 0 -> -0.5
    members = [{"name": "m0"}, {"name": "m1", "corrupted": False}]
    config = _config(verifier={"members": members}, corruption={"channel": "flip", "rate": 0.25})
    pipeline = build_reward_pipeline(config)
    texts = [RIGHT, WRONG] * 200
    examples = [Example(f"q{i}", "7", {}) for i in range(len(texts))]
    verified = pipeline.verify(texts, examples)
    observed = verified.ensemble.rewards[:, 0]
    expected_m0 = np.where(observed == 1.0, 1.5, -0.5)
    np.testing.assert_allclose(verified.optimised, (expected_m0 + verified.ensemble.rewards[:, 1]) / 2)
    # unbiased on average: the corrected m0 reward of right answers is near 1, of wrong ones near 0
    right, wrong = expected_m0[0::2].mean(), expected_m0[1::2].mean()
    assert abs(right - 1.0) < 0.25 and abs(wrong - 0.0) < 0.25


def test_forward_weights_point_the_update_along_the_clean_gradient() -> None:
    # m0 flipped at 0.25: observed 1 -> w1 = rho1 = 0.25, observed 0 -> w0 = rho1 - 1 = -0.75;
    # m1 clean: r - 1 (rho1 = 0)
    members = [{"name": "m0"}, {"name": "m1", "corrupted": False}]
    config = _config(verifier={"members": members}, corruption={"channel": "flip", "rate": 0.25},
                     method_kwargs={"kind": "forward"})
    pipeline = build_reward_pipeline(config)
    texts = [RIGHT, WRONG] * 400
    examples = [Example(f"q{i}", "7", {}) for i in range(len(texts))]
    verified = pipeline.verify(texts, examples)
    observed = verified.ensemble.rewards[:, 0]
    weight_m0 = np.where(observed == 1.0, 0.25, -0.75)
    np.testing.assert_allclose(verified.optimised, (weight_m0 + verified.ensemble.rewards[:, 1] - 1.0) / 2)
    # E[w | r] = -(1 - rho0 - rho1)(1 - r): 0 for right answers, -0.5 for wrong ones
    right, wrong = weight_m0[0::2].mean(), weight_m0[1::2].mean()
    assert abs(right - 0.0) < 0.1 and abs(wrong + 0.5) < 0.1


def test_forward_needs_only_the_false_negative_rate() -> None:
    only_rho1 = _config(corruption={"channel": "noise", "rate": 0.2}, method_kwargs={"kind": "forward", "rho1": 0.3})
    check_config(only_rho1)  # no rho0 anywhere: the forward correction does not need it
    with pytest.raises(ConfigError):
        check_config(_config(corruption={"channel": "noise", "rate": 0.2}, method_kwargs={"rho1": 0.3}))  # backward


@pytest.mark.parametrize(
    ("sections", "line"),
    [
        ({"corruption": {"channel": "flip", "rate": 0.5}}, "method_kwargs: rho0 + rho1 = 1 >= 1"),
        ({"corruption": {"channel": "bias", "rate": 0.2}}, "method_kwargs: channel 'bias' has no known noise rates"),
        ({"corruption": {"channel": "bias", "rate": 0.2}, "method_kwargs": {"kind": "forward"}},
         "method_kwargs: channel 'bias' has no known false-negative rate"),
        ({"method_kwargs": {"kind": "forward"}, "trainer": {"scale_rewards": "group"}},
         "method_kwargs.kind: forward weights are advantages and must not be rescaled"),
        ({"method_kwargs": {"kind": "forward"}, "objective": {"mode": "weighted_length_penalty"}},
         "method_kwargs.kind: forward adds the weight's group mean"),
    ],
)
def test_configs_it_cannot_correct_are_refused_when_loaded(sections, line) -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(_config(**sections))
    assert caught.value.problems[0].startswith(line)


def test_corrected_trains(project) -> None:
    from hackable_rl.config.loading import load_config
    from hackable_rl.core.jsonl import read_jsonl
    from hackable_rl.training.run import run_training

    config = load_config("params.yaml", ["method=corrected", "tracking.enabled=false", "trainer.max_steps=1",
                                               "trainer.permanent_steps=[]"])
    result = run_training(config)
    records = read_jsonl(result.run_dir / "generations" / "step-00001.jsonl")
    rho = config.corruption.rate  # flip: rho0 = rho1 = rate, one corrupted member
    for record in records:
        assert record["method"] == "corrected"
        assert record["optimised_reward"] == pytest.approx((record["reward"] - rho) / (1 - 2 * rho))


def test_forward_trains_on_the_weight_with_its_group_mean_kept(project) -> None:
    from hackable_rl.config.loading import load_config
    from hackable_rl.core.jsonl import read_jsonl
    from hackable_rl.training.run import run_training

    overrides = ["method=corrected", "method_kwargs.kind=forward", "tracking.enabled=false", "trainer.max_steps=1",
                 "trainer.permanent_steps=[]"]
    config = load_config("params.yaml", overrides)
    result = run_training(config)
    records = read_jsonl(result.run_dir / "generations" / "step-00001.jsonl")
    rho1 = config.corruption.rate  # flip: rho1 = rate, one corrupted member
    group = config.trainer.num_generations
    for start in range(0, len(records), group):
        members = records[start:start + group]
        finals = np.array([record["final_reward"] for record in members])
        weights = np.array([record["optimised_reward"] for record in members])
        np.testing.assert_allclose(weights, np.array([r["reward"] for r in members]) - (1 - rho1))
        advantages = np.array([record["advantage"] for record in members])
        np.testing.assert_allclose(advantages, finals - finals.mean() + weights.mean())


def test_the_trainer_adds_the_kept_group_means_to_trls_advantages(monkeypatch) -> None:
    import torch
    import trl

    from hackable_rl.training.trainer import grpo_trainer_class

    class CentredTrainer:  # stands in for TRL's: returns group-centred advantages
        def _generate_and_score_completions(self, inputs):
            return {"advantages": torch.tensor([0.5, -0.5, 0.25, -0.25])}

    monkeypatch.setattr(trl, "GRPOTrainer", CentredTrainer)
    forward = build_reward_pipeline(_config(method_kwargs={"kind": "forward"}))
    reward = type("Reward", (), {"pipeline": forward, "kept_means": [-0.8, -0.8, -0.2, -0.2]})()
    trainer = grpo_trainer_class(reward)()
    advantages = trainer._generate_and_score_completions(None)["advantages"]
    torch.testing.assert_close(advantages, torch.tensor([-0.3, -1.3, 0.05, -0.45]))
    backward = type("Reward", (), {"pipeline": build_reward_pipeline(_config()), "kept_means": None})()
    assert grpo_trainer_class(backward) is CentredTrainer
