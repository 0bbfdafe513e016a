"""Maps the experiment config onto TRL's GRPOConfig (and PEFT's LoraConfig)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig


def uses_cuda() -> bool:
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch

    return torch.cuda.is_available()


def build_grpo_args(config: ExperimentConfig, output_dir: Path) -> Any:
    """GRPOConfig for one run. CPU: no bf16, no activation checkpointing (3.7x slower per step here)."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from trl import GRPOConfig

    trainer, generation = config.trainer, config.generation
    cuda = uses_cuda()
    return GRPOConfig(
        output_dir=str(output_dir),
        seed=config.seed,
        data_seed=config.seed,
        max_steps=trainer.max_steps,
        learning_rate=trainer.learning_rate,
        optim=trainer.optimizer,
        lr_scheduler_type=trainer.scheduler,
        warmup_steps=trainer.warmup_ratio,  # transformers 5: a float < 1 is a ratio of max_steps
        per_device_train_batch_size=trainer.per_device_train_batch_size,
        gradient_accumulation_steps=trainer.gradient_accumulation_steps,
        num_generations=trainer.num_generations,
        beta=trainer.beta,
        loss_type=trainer.loss_type,
        scale_rewards=trainer.scale_rewards,
        max_grad_norm=trainer.max_grad_norm,
        max_completion_length=generation.max_new_tokens,
        temperature=generation.temperature,
        top_p=generation.top_p,
        top_k=generation.top_k,
        use_vllm=generation.use_vllm,
        vllm_mode=generation.vllm_mode,
        # Metrics go through our own callback (MLflow, with resume-exact steps), not TRL's reporters;
        # every step is logged to it, the console gets a line every trainer.progress_interval steps.
        report_to="none",
        logging_steps=1,
        save_strategy="steps",
        save_steps=trainer.save_steps,
        save_total_limit=2,
        save_only_model=False,
        bf16=cuda,
        use_cpu=not cuda,
        activation_checkpointing=False,
        gradient_checkpointing=False,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        # several processes (DDP): every trainable parameter takes part in every forward pass, so DDP
        # need not walk the graph for unused ones after each backward
        ddp_find_unused_parameters=False,
        disable_tqdm=True,  # no bar: `training.console` prints the progress lines
    )


def build_peft_config(config: ExperimentConfig, model: Any = None) -> Any | None:
    """PEFT LoraConfig when `lora.enabled`, else None (full fine-tuning); `lora.top_layers` needs
    the `model`, whose block count says which blocks are the top ones."""
    if not config.lora.enabled:
        return None
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from peft import LoraConfig

    lora = config.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        layers_to_transform=adapted_layers(lora.top_layers, model),
        task_type="CAUSAL_LM",
    )


def adapted_layers(top_layers: int | None, model: Any) -> list[int] | None:
    """The 0-based indices of the top `top_layers` blocks (None: every block)."""
    if top_layers is None:
        return None
    blocks = model.config.get_text_config().num_hidden_layers
    return list(range(max(blocks - top_layers, 0), blocks))
