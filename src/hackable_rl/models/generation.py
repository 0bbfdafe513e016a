"""Batched text generation with the policy: the one sampler evaluation and the warm start share.

Prompts are left-padded so every completion starts at the same column (or, with
`GenerationSettings.common_prefix_first`, padded after the tokens all of a batch's prompts share:
`_encode`); a row stops at the tokenizer's eos (or a configured stop string). Each batch is seeded
with `seed + batch index`: the same prompts, batch size and seed give the same completions.

With `workers` > 1 the batches are decoded side by side in that many threads of this process, each
with its share of torch's threads and its batch's own generator (seeded `seed + batch index`, the
stream a lone decode draws). On 2 cores two one-thread decodes finish sooner than one two-thread
decode (small matrix products use a second thread poorly), and the weights are loaded once.
The tokens are those of one worker wherever torch's kernels give the same numbers at both thread
counts (tests/test_generation_workers.py checks it on the tiny policy; benchmarks/bench_smollm2.py
on SmolLM2). It needs `models.decoding`'s decoder, whose sampling takes a per-thread generator;
on any other path the batches run one after the other.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import torch
from transformers import BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.progress import progress_bar
from hackable_rl.models.decoding import decodes_rows_apart, drawing_from

__all__ = ["Decoding", "GenerationSettings", "GeneratedText", "generate_completions", "generate_decodings"]

log = logging.getLogger(__name__)


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
    common_prefix_first: bool = False
    """Pad each batch after its prompts' common leading tokens instead of on the left (`_encode`)."""

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
            common_prefix_first=section.common_prefix_first,
        )

    @classmethod
    def greedy(cls, max_new_tokens: int, stop: Sequence[str] = (), common_prefix_first: bool = False
               ) -> GenerationSettings:
        return cls(max_new_tokens=max_new_tokens, do_sample=False, stop=tuple(stop),
                   common_prefix_first=common_prefix_first)

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


@dataclass(frozen=True)
class Decoding:
    """One set of prompts to complete under one set of settings (`generate_decodings`)."""

    prompts: list[str]
    """Already formatted (`format_prompt`)."""
    settings: GenerationSettings
    label: str = "generating"
    """Names the loop in the progress bar (or, not on a terminal, its periodic log lines)."""


@dataclass(frozen=True)
class _Batch:
    decoding: int
    index: int
    """Its place among its decoding's batches: the batch draws from `seed + index`."""
    prompts: list[str]


def generate_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    settings: GenerationSettings,
    batch_size: int,
    seed: int,
    label: str = "generating",
    workers: int = 1,
) -> list[GeneratedText]:
    """Completions for `prompts` (already formatted: `format_prompt`), in prompt order; `workers`
    batches are decoded side by side (module docstring)."""
    return generate_decodings(model, tokenizer, [Decoding(prompts, settings, label)], batch_size, seed, workers)[0]


def generate_decodings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    decodings: Sequence[Decoding],
    batch_size: int,
    seed: int,
    workers: int = 1,
) -> list[list[GeneratedText]]:
    """Each decoding's completions, in its prompt order: the same as one `generate_completions` call
    per decoding, with every decoding's batches shared among the workers (no worker waits for the
    next decoding while another finishes this one's last batch)."""
    batches = [_Batch(number, start // batch_size, decoding.prompts[start : start + batch_size])
               for number, decoding in enumerate(decodings)
               for start in range(0, len(decoding.prompts), batch_size)]
    workers = _usable_workers(model, [decoding.settings for decoding in decodings], workers, len(batches))
    label = " + ".join(decoding.label for decoding in decodings if decoding.prompts)
    total = sum(len(batch.prompts) for batch in batches)
    was_training = model.training
    model.eval()
    try:
        with progress_bar(total, label, "completions", enabled=len(batches) > 1) as advance:
            decode = _one_after_another if workers == 1 else functools.partial(_side_by_side, workers=workers)
            done = decode(model, tokenizer, batches, decodings, seed, advance)
    finally:
        model.train(was_training)
    completed: list[list[GeneratedText]] = [[] for _ in decodings]
    for batch, texts in zip(batches, done, strict=True):
        completed[batch.decoding].extend(texts)
    return completed


def _usable_workers(model: PreTrainedModel, settings: list[GenerationSettings], workers: int, batches: int) -> int:
    """At most one worker per batch; one where the decoder cannot give each thread its own draws."""
    if workers > 1 and not (decodes_rows_apart(model) and not any(each.stop for each in settings)):
        log.warning("decoding the batches one after another: side-by-side workers need the decoder that drops "
                    "finished rows (generation.drop_finished_rows: true) and no stop strings")
        return 1
    return max(1, min(workers, batches))


def _one_after_another(model, tokenizer, batches, decodings, seed, advance) -> list[list[GeneratedText]]:
    done = []
    for batch in batches:
        torch.manual_seed(seed + batch.index)
        done.append(_generate_batch(model, tokenizer, batch.prompts, decodings[batch.decoding].settings))
        advance(len(batch.prompts))
    return done


def _side_by_side(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    batches: list[_Batch],
    decodings: Sequence[Decoding],
    seed: int,
    advance: Callable[[int], None],
    workers: int,
) -> list[list[GeneratedText]]:
    threads = torch.get_num_threads()
    each = max(1, threads // workers)

    def decode_batch(batch: _Batch) -> list[GeneratedText]:
        torch.set_num_threads(each)  # this thread's share; torch's count is per thread
        with drawing_from(torch.Generator().manual_seed(seed + batch.index)):
            return _generate_batch(model, tokenizer, batch.prompts, decodings[batch.decoding].settings)

    largest_first = sorted(range(len(batches)), key=lambda number: -len(batches[number].prompts))
    done: dict[int, list[GeneratedText]] = {}
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decode") as pool:
            futures = {pool.submit(decode_batch, batches[number]): number for number in largest_first}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                advance(len(batches[futures[future]].prompts))
    finally:
        torch.set_num_threads(threads)
    return [done[number] for number in range(len(batches))]


@torch.inference_mode()
def _generate_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    settings: GenerationSettings,
) -> list[GeneratedText]:
    encoded = _encode(tokenizer, prompts, settings.common_prefix_first).to(model.device)
    output = model.generate(
        **encoded,
        **settings.generate_kwargs(),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **({"stop_strings": list(settings.stop), "tokenizer": tokenizer} if settings.stop else {}),
    )
    completions = output[:, encoded["input_ids"].shape[1] :]  # [B, new tokens]: left padding aligns them
    return [_decode_row(tokenizer, row.tolist(), settings.stop) for row in completions]


def _encode(tokenizer: PreTrainedTokenizerBase, prompts: list[str], common_first: bool) -> Any:
    """The batch's input ids and mask: left-padded, or with the padding after the tokens every prompt
    starts with (each row keeps at least its last token after the padding, so every row's last column,
    where its first new token is chosen, is its own). Either way each row's tokens are numbered
    0..n-1 from the mask and end at the same column."""
    if not common_first:
        return tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    width, shortest = max(map(len, ids)), min(map(len, ids))
    shared = 0
    while shared < shortest - 1 and all(row[shared] == ids[0][shared] for row in ids):
        shared += 1
    pad = tokenizer.pad_token_id
    return BatchEncoding({
        "input_ids": torch.tensor([row[:shared] + [pad] * (width - len(row)) + row[shared:] for row in ids]),
        "attention_mask": torch.tensor([[1] * shared + [0] * (width - len(row)) + [1] * (len(row) - shared)
                                        for row in ids]),
    })


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
