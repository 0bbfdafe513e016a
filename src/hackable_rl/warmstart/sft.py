"""Supervised fine-tuning on worked solutions: a fixed number of AdamW steps on completion tokens.

Read top to bottom: examples become token ids (`encode_examples`), a seeded order picks each step's
batch (`batch_order`), `collate` pads it and masks the prompt out of the loss, and `sft_steps` is
the loop. A STEP budget, not a time budget: on CPU the same seed and steps give bit-identical weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.progress import progress_bar
from hackable_rl.warmstart.data import SftExample

__all__ = ["IGNORE_INDEX", "EncodedExample", "encode_examples", "collate", "warmup_cosine", "batch_order", "sft_steps"]

IGNORE_INDEX = -100  # label id that cross-entropy skips: prompt tokens and padding carry no loss
GRAD_CLIP_NORM = 1.0

EncodedExample = tuple[list[int], int]
"""(prompt + completion + eos ids, prompt length)."""

StepCallback = Callable[[int, float, float], None]
"""Called after every step with (step, loss, learning rate)."""


def encode_examples(
    tokenizer: PreTrainedTokenizerBase, examples: list[SftExample], max_length: int
) -> list[EncodedExample]:
    """(prompt + completion + eos ids, prompt length) per example.

    Prompt and completion are tokenized apart, as in generation, where the completion starts right
    after the prompt's tokens; tokenizing them together could merge across the boundary. One batch
    call each (the same ids): 80,000 single calls took about 2.5 times as long here.
    """
    prompts = tokenizer([example.prompt for example in examples], add_special_tokens=False)["input_ids"]
    completions = tokenizer([example.completion for example in examples], add_special_tokens=False)["input_ids"]
    encoded, too_long = [], 0
    for prompt, completion in zip(prompts, completions, strict=True):
        ids = prompt + completion + [tokenizer.eos_token_id]
        too_long += len(ids) > max_length
        encoded.append((ids, len(prompt)))
    if too_long:
        longest = max(len(ids) for ids, _ in encoded)
        raise UserError(
            f"model.tiny.max_position_embeddings: {max_length} is shorter than {too_long} worked solutions "
            f"(longest {longest} tokens); raise it or shorten the problems"
        )
    return encoded


def collate(batch: list[EncodedExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input ids, attention mask, and labels that score completion tokens only."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # [B, T]
    attention = torch.zeros((len(batch), width), dtype=torch.long)  # [B, T]
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)  # [B, T]
    for row, (ids, prompt_length) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, prompt_length : len(ids)] = torch.tensor(ids[prompt_length:])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def warmup_cosine(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Learning-rate multiplier: linear warm-up to 1, then cosine decay to 0 at `total_steps`."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return multiplier


def batch_order(count: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Example indices per step: seeded reshuffles, one epoch after another.

    Its own generator, so the order does not depend on what else consumed torch's global RNG.
    """
    generator = torch.Generator().manual_seed(seed)
    order: list[int] = []
    while len(order) < steps * batch_size:
        order.extend(torch.randperm(count, generator=generator).tolist())
    return [order[step * batch_size : (step + 1) * batch_size] for step in range(steps)]


def sft_steps(
    model: PreTrainedModel,
    encoded: list[EncodedExample],
    config: ExperimentConfig,
    pad_id: int,
    on_step: StepCallback | None = None,
) -> list[float]:
    """Runs `warmstart.steps` AdamW steps on completion tokens; returns the loss of every step."""
    section = config.warmstart
    optimizer = torch.optim.AdamW(model.parameters(), lr=section.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(section.warmup_steps, section.steps))
    batches = batch_order(len(encoded), section.batch_size, section.steps, config.warmstart_seed)
    losses = []
    model.train()
    # Not on a terminal the caller's step logger writes the lines (with the loss), so no second series.
    with progress_bar(section.steps, "warm start", "steps", lines_when_piped=False) as advance:
        for step, indices in enumerate(batches):
            batch = collate([encoded[index] for index in indices], pad_id)
            batch = {key: tensor.to(model.device) for key, tensor in batch.items()}
            loss = model(**batch).loss  # mean cross-entropy over the batch's completion tokens
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP_NORM)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if on_step is not None:
                on_step(step, losses[-1], schedule.get_last_lr()[0])
            advance()
    model.eval()
    return losses
