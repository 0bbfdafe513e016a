"""TRL's GRPOTrainer as a run builds it: one reward function (`reward.pipeline.ObjectiveReward`),
LoRA's targets checked against the policy first, the group mean kept for a method that needs it, and
the loss's LM head on completion tokens only.

The kept group mean. GRPO subtracts each group's mean reward. The forward correction
(`reward/methods/corrected.py`) is a constant shift of the reward that only works if it is *not*
subtracted, so for a method that declares `keeps_group_mean` the trainer adds back the group mean of
the optimised reward, which the reward function computed for the same batch
(`ObjectiveReward.kept_means`). The other components of an additive objective stay group-centred.

The LM head. TRL 1.16 computes the GRPO loss's log-probabilities with a fused LM head
(`trl.trainer.utils.add_fused_lm_head`) that projects, tile by tile, only the positions whose label
is scored (the completion tokens) where Triton runs (CUDA, XPU). Elsewhere it projects every
position, prompt and padding included, and masks them afterwards, so that the tile shapes stay fixed
for compilers that would otherwise recompile on every batch. Eager CPU code has no such cost, and
for a model with a large vocabulary (SmolLM2: 49,152 words, about a fifth of its forward's
arithmetic) the projected prompt is pure waste. `completion_only_head` makes TRL take its compact
path on CPU for as long as it is open. The kept positions' log-probabilities are the same computation
on fewer rows; a matrix product of fewer rows may round differently in the last bit
(`tests/test_lm_head.py` bounds the difference).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import trl
import trl.trainer.utils as trl_utils

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.models.decoding import dropping_finished_rows
from hackable_rl.models.loading import policy_backbone
from hackable_rl.models.shared_prefix import share_prefixes
from hackable_rl.reward.pipeline import ObjectiveReward
from hackable_rl.training.checkpoints import resume_dir
from hackable_rl.training.console import quiet_trainer, silence_known_warnings
from hackable_rl.training.trl_args import build_grpo_args, build_peft_config

__all__ = ["check_lora_targets", "completion_only_head", "grpo_trainer", "grpo_trainer_class"]


def check_lora_targets(config: Any, model: Any) -> None:
    """`lora.target_modules` and `lora.top_layers` against the loaded policy, before TRL wraps it (PEFT
    would fail inside the trainer's constructor with a traceback, after the run folder was made): a
    UserError naming the field for a name that matches no module of `model` (PEFT matches a name to a
    module whose dotted path is the name or ends with `.name`)."""
    if not config.lora.enabled:
        return
    blocks = model.config.get_text_config().num_hidden_layers
    if config.lora.top_layers is not None and config.lora.top_layers > blocks:
        raise UserError(f"lora.top_layers: {config.lora.top_layers} is more than the policy's {blocks} blocks")
    names = [name for name, _ in model.named_modules() if name]
    for target in config.lora.target_modules:
        if not any(name == target or name.endswith(f".{target}") for name in names):
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                             if type(module).__name__ == "Linear"})
            raise UserError(f"lora.target_modules: {target!r} is no module of the policy; its linear layers are "
                            f"{', '.join(linear)}")


def grpo_trainer(config: ExperimentConfig, model: Any, tokenizer: Any, dataset: Any, reward: ObjectiveReward,
                 run_dir: Path, callbacks: list[Any]) -> Any:
    """TRL's GRPOTrainer on the policy and prompts, rewarded by `reward`, checkpointing into the run
    folder, quiet on the console: what every training process builds, with its own callbacks."""
    silence_known_warnings()
    trainer = grpo_trainer_class(reward)(
        model=model,
        reward_funcs=[reward],
        args=build_grpo_args(config, resume_dir(run_dir)),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=build_peft_config(config, model),
        callbacks=callbacks,
    )
    quiet_trainer(trainer)
    if config.trainer.share_prompt_prefix:
        share_prefixes(policy_backbone(trainer.model))
    if config.generation.drop_finished_rows:
        dropping_finished_rows(trainer.model)  # TRL samples through the model's generate
    return trainer


def grpo_trainer_class(reward: Any) -> type:
    """GRPOTrainer, or its subclass that adds `reward.kept_means` to every generation batch's advantages
    when the run's method keeps the group mean."""
    if not reward.pipeline.keeps_group_mean():
        return trl.GRPOTrainer

    class KeptMeanGRPOTrainer(trl.GRPOTrainer):
        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            if reward.kept_means is not None:  # one process: the reward saw exactly this batch
                advantages = output["advantages"]
                kept = torch.as_tensor(reward.kept_means, dtype=advantages.dtype, device=advantages.device)
                output["advantages"] = advantages + kept.reshape(advantages.shape)
            return output

    return KeptMeanGRPOTrainer


@contextmanager
def completion_only_head(enabled: bool = True) -> Iterator[None]:
    """While open, TRL's fused LM head projects only scored positions on every device."""
    if not enabled:
        yield
        return
    original = trl_utils._use_triton  # TRL's choice of the compact path; its kernels keep their own
    trl_utils._use_triton = lambda device: original(device) or device.type == "cpu"
    try:
        yield
    finally:
        trl_utils._use_triton = original
