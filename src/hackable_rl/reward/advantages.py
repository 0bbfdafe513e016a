"""GRPO's advantages, as TRL computes them from the rewards the pipeline returns: what each
generation record keeps beside its reward.

Why the advantage is computed twice, here and in TRL: TRL computes its advantages inside its
`_generate_and_score_completions`, after the reward function returns, and keeps them in the batch
it trains on without exposing them to callbacks; overriding that method would tie the project to
one TRL version's internals. So the records compute the same formula (`group_advantages`: TRL's
group centring and `scale_rewards` scaling) from the same rewards, at the same moment. A method that
keeps the group mean (the forward correction) gets it added back (`kept_group_means`; training adds
the same to TRL's advantages: `training/trainer.py`).
"""

from __future__ import annotations

import math

import numpy as np

from hackable_rl.reward.records import VerifierRecord

__all__ = ["group_advantages", "group_means", "kept_group_means"]


def group_advantages(rewards: list[float], group_size: int, scale: str) -> list[float]:
    """The advantages TRL computes from these rewards (one reward function, weight 1).

    advantage = r - mean(group); divided by the group (or batch) std + 1e-4 unless scale is
    `none`, which the spec keeps for both methods (a group where every reward is equal then
    contributes no gradient, whatever the reward's scale).
    """
    values = np.asarray(rewards, dtype=np.float64).reshape(-1, group_size)  # [prompts, G]
    centred = values - values.mean(axis=1, keepdims=True)
    if scale == "group":
        centred = centred / (values.std(axis=1, ddof=1, keepdims=True) + 1e-4)
    elif scale == "batch":
        centred = centred / (values.std(ddof=1) + 1e-4)
    return centred.reshape(-1).tolist()


def group_means(values: list[float], group_size: int) -> list[float]:
    """Each completion's group mean of `values` (what a method that keeps it adds to the advantage)."""
    grouped = np.asarray(values, dtype=np.float64).reshape(-1, group_size)
    return np.repeat(grouped.mean(axis=1), group_size).tolist()


def kept_group_means(records: list[VerifierRecord], group_size: int, fill: float) -> list[float]:
    """The group mean of the optimised reward per completion, a missing one imputed with `fill`."""
    optimised = [fill if record.optimised_reward is None or math.isnan(record.optimised_reward)
                 else record.optimised_reward for record in records]
    return group_means(optimised, group_size)
