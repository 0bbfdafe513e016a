"""Sampling that drops a row from the batch once it has finished.

transformers' `generate` keeps every row in the batch until the last one stops: a row that wrote
its eos after 20 tokens still goes through every layer, padding, until a longer one ends at 47.
On a CPU, where a decoding step's time grows with its rows (SmolLM2-135M: 0.22 s a step for 64
rows, two thirds of it matrix products), that is wasted work in proportion to the spread of the
completions' lengths. `decode` runs the same forward calls on the rows still writing: after each
step it takes the finished rows out of the key/value cache, the attention mask and the positions.

What stays the same: the prefill, the positions (from the left padding, as `generate` numbers
them), the logits processing (temperature, top-k, top-p, min-p, in `generate`'s order) and the
sampling call. So until the first row finishes, the tokens are `generate`'s, byte for byte, for
the same seed (tests/test_decoding.py). After it, fewer rows draw from torch's random stream, so
the samples differ from `generate`'s while coming from the same distribution; greedy decoding
differs only where a matrix product of fewer rows rounds an argmax differently.

`dropping_finished_rows(model)` installs it as the model's `generate` for the settings it covers
(anything else, a repetition penalty or beams, goes to the original): TRL's GRPOTrainer then samples
through it unchanged. Inside `drawing_from(generator)` a thread's samples come from its own
generator, so two threads can decode two batches side by side, each batch drawing the stream a
lone decode of it would (`models.generation` seeds one generator per batch).
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from hackable_rl.core import numerics

__all__ = ["covers", "decode", "decodes_rows_apart", "decoding_dtype", "drawing_from", "dropping_finished_rows"]

_DRAWS = threading.local()
"""`generator`: the torch.Generator this thread's `decode` samples from (absent: torch's global one)."""

_NEUTRAL = {"repetition_penalty": 1.0, "num_beams": 1, "num_return_sequences": 1, "no_repeat_ngram_size": 0}


def covers(generation_config: Any) -> bool:
    """Whether `decode` reproduces `generate` under this GenerationConfig (else `generate` runs)."""
    for name, neutral in _NEUTRAL.items():
        value = getattr(generation_config, name, None)
        if value is not None and value != neutral:
            return False
    return not (getattr(generation_config, "stop_strings", None) or getattr(generation_config, "suppress_tokens", None)
                or getattr(generation_config, "bad_words_ids", None) or getattr(generation_config, "min_new_tokens", None))


def _warpers(config: Any) -> list[Any]:
    """`generate`'s sampling warpers for these settings, in its order."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers: list[Any] = []
    if config.temperature is not None and config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k is not None and config.top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
    if config.top_p is not None and config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
    if getattr(config, "min_p", None) is not None:
        warpers.append(MinPLogitsWarper(min_p=config.min_p, min_tokens_to_keep=1))
    return warpers


def _eos_ids(config: Any) -> torch.Tensor:
    eos = config.eos_token_id
    return torch.tensor(eos if isinstance(eos, list | tuple) else [eos])


@torch.no_grad()
def decode(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, config: Any) -> torch.Tensor:
    """[B, prompt + new tokens]: each row's prompt, its tokens up to and including its eos, then
    padding, as `generate(input_ids, attention_mask, generation_config=config)` returns them."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from transformers.cache_utils import DynamicCache

    rows, device = input_ids.shape[0], input_ids.device
    eos = _eos_ids(config).to(device)
    warpers = _warpers(config) if config.do_sample else []
    written = torch.full((rows, config.max_new_tokens), config.pad_token_id, dtype=input_ids.dtype, device=device)
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)  # as generate numbers them
    cache = DynamicCache(config=model.config)
    active = torch.arange(rows, device=device)  # the batch rows still writing, in cache order
    mask = attention_mask
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                   logits_to_keep=1).logits
    next_position = positions[:, -1] + 1
    steps = 0
    for step in range(config.max_new_tokens):
        tokens = _choose(logits[:, -1].to(dtype=torch.float32), warpers, config.do_sample)  # [A]
        written[active, step] = tokens
        steps = step + 1
        still = ~torch.isin(tokens, eos)
        if steps == config.max_new_tokens or not still.any():
            break
        if not still.all():  # the finished rows leave the cache, the mask and the positions
            kept = still.nonzero().squeeze(1)
            cache.batch_select_indices(kept)
            active, tokens, mask, next_position = active[kept], tokens[kept], mask[kept], next_position[kept]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        logits = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_position[:, None],
                       cache=cache, use_cache=True, logits_to_keep=1).logits
        next_position = next_position + 1
    return torch.cat([input_ids, written[:, :steps]], dim=-1)


def _choose(scores: torch.Tensor, warpers: list[Any], sample: bool) -> torch.Tensor:
    if not sample:
        return torch.argmax(scores, dim=-1)
    for warper in warpers:
        scores = warper(None, scores)  # none of these warpers reads the ids
    probs = torch.nn.functional.softmax(scores, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=getattr(_DRAWS, "generator", None)).squeeze(1)


@contextmanager
def drawing_from(generator: torch.Generator) -> Iterator[None]:
    """`decode`'s samples in this thread come from `generator` (the others' stay on theirs)."""
    _DRAWS.generator = generator
    try:
        yield
    finally:
        del _DRAWS.generator


def decoding_dtype(name: str, device: str) -> torch.dtype:
    """torch's type for `evaluation.dtype` (`float32`, `bfloat16`). Warns where bfloat16 would run on a
    CPU without avx512_bf16 or AMX: torch then multiplies bf16 matrices in its own generic kernels,
    slower than float32 rather than faster."""
    dtype = getattr(torch, name)
    if dtype is torch.bfloat16 and str(device) == "cpu" and "yes" not in (numerics.cpu_has_flag("avx512_bf16"),
                                                                          numerics.cpu_has_flag("amx_bf16")):
        logging.getLogger(__name__).warning(
            "evaluation.dtype bfloat16: this CPU has neither avx512_bf16 nor amx_bf16, so bf16 matrix products "
            "run in generic kernels, slower than float32; set evaluation.dtype: auto")
    return dtype


def dropping_finished_rows(model: Any) -> None:
    """Makes `model.generate` decode with `decode` whenever it covers the call's settings."""
    original = model.generate

    @functools.wraps(original)
    def generate(input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 generation_config: Any = None, **kwargs: Any) -> Any:
        config = _settings(model, generation_config, kwargs)
        if config is None or input_ids is None or attention_mask is None or not covers(config):
            return original(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                            **kwargs)
        return decode(model, input_ids, attention_mask, config)

    generate.decodes_rows_apart = True
    model.generate = generate


def decodes_rows_apart(model: Any) -> bool:
    """Whether `dropping_finished_rows` is installed on this model (its sampling honours `drawing_from`)."""
    return getattr(model.generate, "decodes_rows_apart", False)


_DECODING_KEYS = {"max_new_tokens", "do_sample", "temperature", "top_p", "top_k", "min_p", "pad_token_id",
                  "eos_token_id", "bos_token_id", "disable_compile", "repetition_penalty", "cache_implementation"}


def _settings(model: Any, generation_config: Any, kwargs: dict[str, Any]) -> Any:
    """The call's GenerationConfig (its own, or the model's, updated by keyword settings); None when
    a keyword is one `decode` does not know."""
    if set(kwargs) - _DECODING_KEYS:
        return None
    config = copy.deepcopy(generation_config if generation_config is not None else model.generation_config)
    for key, value in kwargs.items():
        setattr(config, key, value)
    if config.max_new_tokens is None or config.pad_token_id is None or config.eos_token_id is None:
        return None
    return config
