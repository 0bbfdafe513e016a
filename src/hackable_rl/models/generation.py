"""Batched text generation with the policy: the one sampler evaluation and the warm start share.

Prompts are left-padded so every completion starts at the same column; a row stops at the
tokenizer's eos (or a configured stop string). Each batch is seeded with `seed + batch index`:
the same prompts, batch size and seed give the same completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.progress import progress_bar

__all__ = ["GenerationSettings", "GeneratedText", "generate_completions"]


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings for one call of `generate_completions`."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    """0: no top-k filtering."""
    do_sample: bool = True
    """False: greedy decoding (temperature, top_p and top_k are then ignored)."""
    stop: tuple[str, ...] = ()
    """Stop strings besides eos; the completion text is cut before the first one."""

    @classmethod
    def for_training(cls, config: ExperimentConfig) -> GenerationSettings:
        """Rollout settings from the `generation` section (temperature 0 means greedy)."""
        section = config.generation
        return cls(
            max_new_tokens=section.max_new_tokens,
            temperature=section.temperature,
            top_p=section.top_p,
            top_k=section.top_k,
            do_sample=section.temperature > 0,
            stop=tuple(section.stop),
        )

    @classmethod
    def for_evaluation(cls, config: ExperimentConfig) -> GenerationSettings:
        """Held-out decoding: the `evaluation` section's decoding, the training completion budget."""
        section = config.evaluation
        sample = section.decoding == "sample" and section.temperature > 0
        return cls(
            max_new_tokens=config.generation.max_new_tokens,
            temperature=section.temperature,
            top_p=section.top_p,
            top_k=config.generation.top_k,
            do_sample=sample,
            stop=tuple(config.generation.stop),
        )

    @classmethod
    def greedy(cls, max_new_tokens: int, stop: Sequence[str] = ()) -> GenerationSettings:
        return cls(max_new_tokens=max_new_tokens, do_sample=False, stop=tuple(stop))

    def generate_kwargs(self) -> dict:
        """Keyword arguments for `model.generate` (greedy passes no sampling knobs)."""
        if not self.do_sample:
            return {"max_new_tokens": self.max_new_tokens, "do_sample": False}
        return {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
        }


@dataclass(frozen=True)
class GeneratedText:
    """One completion: its text (special tokens removed) and how many tokens it took."""

    text: str
    n_tokens: int
    """Generated tokens up to and including the stopping eos (padding after it not counted); cut at
    a stop string, the tokens of the kept text."""
    finished: bool
    """Stopped at eos or a stop string, rather than at the max_new_tokens budget."""


def generate_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    settings: GenerationSettings,
    batch_size: int,
    seed: int,
    label: str = "generating",
) -> list[GeneratedText]:
    """Completions for `prompts` (already formatted: `format_prompt`), in prompt order; `label` names
    the loop in its progress bar (or, not on a terminal, its periodic log lines)."""
    if not prompts:
        return []
    batches = [prompts[start : start + batch_size] for start in range(0, len(prompts), batch_size)]
    results: list[GeneratedText] = []
    was_training = model.training
    model.eval()
    try:
        with progress_bar(len(prompts), label, "completions", enabled=len(batches) > 1) as advance:
            for index, batch in enumerate(batches):
                torch.manual_seed(seed + index)
                results.extend(_generate_batch(model, tokenizer, batch, settings))
                advance(len(batch))
    finally:
        model.train(was_training)
    return results


@torch.inference_mode()
def _generate_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    settings: GenerationSettings,
) -> list[GeneratedText]:
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    output = model.generate(
        **encoded,
        **settings.generate_kwargs(),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **({"stop_strings": list(settings.stop), "tokenizer": tokenizer} if settings.stop else {}),
    )
    completions = output[:, encoded["input_ids"].shape[1] :]  # [B, new tokens]: left padding aligns them
    return [_decode_row(tokenizer, row.tolist(), settings.stop) for row in completions]


def _decode_row(tokenizer: PreTrainedTokenizerBase, ids: list[int], stop: tuple[str, ...]) -> GeneratedText:
    eos = tokenizer.eos_token_id
    finished = eos in ids
    kept = ids[: ids.index(eos) + 1] if finished else ids
    text = tokenizer.decode(kept, skip_special_tokens=True)
    cut = min((text.find(marker) for marker in stop if marker in text), default=-1)
    if cut >= 0:
        text = text[:cut]
        return GeneratedText(
            text=text, n_tokens=len(tokenizer(text, add_special_tokens=False)["input_ids"]), finished=True
        )
    return GeneratedText(text=text, n_tokens=len(kept), finished=finished)
