"""The tiny causal LM: a Qwen2- or Llama-shaped transformer built from config, tied embeddings.

At the default sizes (hidden 128, 4 layers, 4 heads, MLP 512, vocab ~400) it has about 1.1M
parameters: small enough to warm-start and GRPO-train on two CPU cores in minutes.
"""

from __future__ import annotations

from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from hackable_rl.config import TinyModelConfig

__all__ = ["build_tiny_model"]

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
