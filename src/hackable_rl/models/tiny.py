"""The tiny causal LM: a Qwen2- or Llama-shaped transformer built from config, tied embeddings.

At the default sizes (hidden 128, 4 layers, 4 heads, MLP 512, vocab ~400) it has about 1.1M
parameters: small enough to warm-start and GRPO-train on two CPU cores in minutes.
"""

from __future__ import annotations

from pathlib import Path

from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from hackable_rl.config.experiment import TinyModelConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json

__all__ = ["build_tiny_model", "check_tiny_shape"]

_FAMILIES = {
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "llama": (LlamaConfig, LlamaForCausalLM),
}


def build_tiny_model(
    cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerBase, attn_implementation: str = "sdpa"
) -> PreTrainedModel:
    """A freshly initialised model sized by `cfg`, its vocabulary matching `tokenizer`.

    Initialisation draws from torch's global RNG: seed it (`torch.manual_seed`) first.
    """
    config_class, model_class = _FAMILIES[cfg.architecture]
    model_config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,  # plain multi-head attention: no GQA at this size
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,  # the embedding is most of the parameters; tying halves it
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation=attn_implementation,
    )
    model = model_class(model_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


# model.tiny field -> the key of the saved config.json that records it.
_SHAPE_KEYS = {
    "architecture": "model_type",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position_embeddings",
}


def check_tiny_shape(folder: Path, cfg: TinyModelConfig) -> None:
    """Refuses a warm-started policy whose shape is not the configured one: loading it would train
    and record a model.tiny that never took effect. (vocab_size is the tokenizer's target, which
    the trained vocabulary may fall short of, so it is not compared.)"""
    saved = read_json(folder / "config.json")
    for field, key in _SHAPE_KEYS.items():
        wanted, found = getattr(cfg, field), saved.get(key) if isinstance(saved, dict) else None
        if wanted != found:
            raise UserError(
                f"model.tiny.{field}: {wanted!r}, but the warm-started policy in {folder} has {found!r}; run "
                "`hackable-rl warmstart` to build it at this shape, or restore the value"
            )
