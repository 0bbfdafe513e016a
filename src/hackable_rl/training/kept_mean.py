"""TRL's GRPOTrainer for a method whose optimised reward enters the advantage whole.

GRPO subtracts each group's mean reward. The forward correction (`methods/corrected.py`) is a
constant shift of the reward that only works if it is *not* subtracted, so for a method that
declares `keeps_group_mean` the trainer adds back the group mean of the optimised reward, which the
reward function computed for the same batch (`ObjectiveReward.kept_means`). The other components of
an additive objective stay group-centred.
"""

from __future__ import annotations

from typing import Any

from hackable_rl.training.reward import method_keeps_group_mean


def grpo_trainer_class(reward: Any) -> type:
    """GRPOTrainer, or its subclass that adds `reward.kept_means` to every generation batch's advantages
    when the run's method keeps the group mean."""
    from trl import GRPOTrainer

    if not method_keeps_group_mean(reward.pipeline):
        return GRPOTrainer

    class KeptMeanGRPOTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            import torch

            output = super()._generate_and_score_completions(inputs)
            if reward.kept_means is not None:  # one process: the reward saw exactly this batch
                advantages = output["advantages"]
                kept = torch.as_tensor(reward.kept_means, dtype=advantages.dtype, device=advantages.device)
                output["advantages"] = advantages + kept.reshape(advantages.shape)
            return output

    return KeptMeanGRPOTrainer
