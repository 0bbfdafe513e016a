"""Each GRPO group's prompt through the policy once, not once per completion.

TRL samples G completions per prompt and scores them as G full rows, so a prompt's tokens (two
thirds of a row here) go through every layer G times: in generation's prefill, and forward and
backward in the loss. Under causal attention a token's hidden states depend only on the tokens
before it, so rows that start with the same tokens have the same keys, values and hidden states
there. `share_prefixes` wraps the policy's backbone: it finds the split L at which running each
distinct L-token prefix once, then every row's remaining tokens against it, costs the fewest token
passes (rows are grouped by content, so TRL's shuffled loss batch groups as well as generation's
ordered one); it repeats each prefix's keys, values and hidden states over the rows that share it.
Autograd sums the gradients of the repeated prefix, so the sampled tokens, the loss, its gradient
and the update are those of the full forward (measured: byte-identical records and weights over a
6-step training here; float rounding could in principle differ where other matrix shapes sum in
another order).

Positions and masks are the full call's: given position ids (generation's, from the left padding)
are split with the tokens; without them the suffix's positions continue from L, as TRL's loss
forward numbers every row 0..T-1. Every other call (a decoding step, a batch whose best split saves
fewer than MIN_SAVED_SHARE of the token passes) goes through the backbone unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["MIN_SAVED_SHARE", "PrefixSplit", "best_split", "share_prefixes"]

MIN_SAVED_SHARE = 0.1
"""A split that saves less than this share of the token passes is not worth a second call."""


@dataclass(frozen=True)
class PrefixSplit:
    """Where to split a batch and which rows share which prefix."""

    length: int
    """L: the tokens every row shares with its prefix's other rows."""
    sources: torch.Tensor
    """[P] the row each distinct prefix is taken from (its first row)."""
    owner: torch.Tensor
    """[B] each row's prefix, an index into `sources`."""

    def passes(self, width: int) -> int:
        """Token passes through the layers: each prefix once, then every row's remaining tokens."""
        return len(self.sources) * self.length + len(self.owner) * (width - self.length)


def best_split(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> PrefixSplit | None:
    """The split with the fewest token passes, or None when it saves less than MIN_SAVED_SHARE.

    Rows i and j share their first L tokens exactly when their longest common prefix (ids and mask)
    is at least L; sharing a prefix is an equivalence, so at every L the rows fall into classes. A
    row starts a new class at L when no earlier row shares L tokens with it.
    """
    rows, width = input_ids.shape
    same = input_ids[:, None, :] == input_ids[None, :, :]  # [B, B, T]
    if attention_mask is not None:
        same &= attention_mask[:, None, :] == attention_mask[None, :, :]
    common = same.int().cumprod(dim=2).sum(dim=2)  # [B, B] longest common prefix
    earlier = torch.tril(common, diagonal=-1).max(dim=1).values  # [B] longest prefix shared with an earlier row
    lengths = torch.arange(1, width + 1)  # [T] candidate splits
    classes = (earlier[None, :] < lengths[:, None]).sum(dim=1)  # [T] distinct prefixes at each split
    passes = classes * lengths + rows * (width - lengths)  # [T]
    best = int(passes.argmin())
    length = best + 1
    if passes[best] > (1 - MIN_SAVED_SHARE) * rows * width:
        return None
    starts = earlier < length  # [B] rows whose prefix no earlier row has
    sources = starts.nonzero().squeeze(1)  # [P]
    shares = common[:, sources] >= length  # [B, P]: exactly one True per row
    return PrefixSplit(length, sources, shares.int().argmax(dim=1))


def _is_full_sequence_call(input_ids: Any, attention_mask: Any, cache: Any, inputs_embeds: Any, use_cache: Any) -> bool:
    """The loss forward (no cache) or generation's prefill (an empty cache) on token ids."""
    if input_ids is None or inputs_embeds is not None or input_ids.dim() != 2:
        return False
    if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):  # a prepared mask mapping
        return False
    if cache is None:
        return not use_cache
    return cache.get_seq_length() == 0


def share_prefixes(backbone: torch.nn.Module) -> None:
    """Wraps `backbone.forward` (a transformers decoder model, e.g. Qwen2Model) so that a full-sequence
    call runs each shared prefix once (see the module docstring)."""
    from transformers.cache_utils import DynamicCache
    from transformers.modeling_outputs import BaseModelOutputWithPast

    original = backbone.forward

    @functools.wraps(original)
    def forward(input_ids: torch.Tensor | None = None, attention_mask: Any = None, position_ids: Any = None,
                cache: Any = None, inputs_embeds: Any = None, use_cache: bool | None = None, **kwargs: Any):
        full = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                    inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
        if not _is_full_sequence_call(input_ids, attention_mask, cache, inputs_embeds, use_cache):
            return original(**full)
        split = best_split(input_ids, attention_mask)
        if split is None:
            return original(**full)
        length, width = split.length, input_ids.shape[1]
        shared = cache if cache is not None else DynamicCache(config=backbone.config)
        prefix = original(input_ids=input_ids[split.sources, :length],
                          attention_mask=_columns(attention_mask, split.sources, slice(None, length)),
                          position_ids=_columns(position_ids, split.sources, slice(None, length)),
                          cache=shared, use_cache=True, **kwargs).last_hidden_state  # [P, L, H]
        shared.batch_select_indices(split.owner)  # every row attends to its own prefix's keys and values
        hidden = prefix[split.owner]  # [B, L, H]
        if length < width:
            suffix = original(input_ids=input_ids[:, length:], attention_mask=attention_mask,
                              position_ids=_columns(position_ids, slice(None), slice(length, None)),
                              cache=shared, use_cache=True, **kwargs).last_hidden_state  # [B, T - L, H]
            hidden = torch.cat([hidden, suffix], dim=1)  # [B, T, H]
        return BaseModelOutputWithPast(last_hidden_state=hidden, cache=shared if use_cache else None)

    backbone.forward = forward


def _columns(tensor: torch.Tensor | None, rows: Any, columns: slice) -> torch.Tensor | None:
    return None if tensor is None else tensor[rows, columns]
