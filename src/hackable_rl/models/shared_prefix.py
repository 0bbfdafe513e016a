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

With `max_levels` above 1 the prefixes nest: the tokens every row shares (a batch's system prompt
and instruction, where `GenerationSettings.common_prefix_first` put them before the padding) run
once, then each prompt's own tokens once against them, then each row's rest (`best_chain`).

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

__all__ = ["LEVEL_SAVED_SHARE", "MIN_SAVED_SHARE", "PrefixSplit", "best_chain", "best_split", "share_prefixes"]

MIN_SAVED_SHARE = 0.1
"""A split that saves less than this share of the token passes is not worth a second call."""

LEVEL_SAVED_SHARE = 0.05
"""A further nested level must save this share of the full call's token passes (it costs one more call)."""


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
    return _best_split(*_classes_and_common(input_ids, attention_mask), *input_ids.shape)


def _best_split(classes: torch.Tensor, common: torch.Tensor, rows: int, width: int) -> PrefixSplit | None:
    lengths = torch.arange(1, width + 1)  # [T] candidate splits
    passes = classes * lengths + rows * (width - lengths)  # [T]
    best = int(passes.argmin())
    if passes[best] > (1 - MIN_SAVED_SHARE) * rows * width:
        return None
    return _split_at(best + 1, common)


def _classes_and_common(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """([T] the distinct prefixes at each split length 1..T, [B, B] each pair's longest common prefix)."""
    same = input_ids[:, None, :] == input_ids[None, :, :]  # [B, B, T]
    if attention_mask is not None:
        same &= attention_mask[:, None, :] == attention_mask[None, :, :]
    common = same.int().cumprod(dim=2).sum(dim=2)  # [B, B]
    earlier = torch.tril(common, diagonal=-1).max(dim=1).values  # [B] longest prefix shared with an earlier row
    lengths = torch.arange(1, input_ids.shape[1] + 1)  # [T]
    return (earlier[None, :] < lengths[:, None]).sum(dim=1), common


def _split_at(length: int, common: torch.Tensor) -> PrefixSplit:
    earlier = torch.tril(common, diagonal=-1).max(dim=1).values
    sources = (earlier < length).nonzero().squeeze(1)  # [P] rows whose prefix no earlier row has
    shares = common[:, sources] >= length  # [B, P]: exactly one True per row
    return PrefixSplit(length, sources, shares.int().argmax(dim=1))


def best_chain(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, max_levels: int = 1) -> list[PrefixSplit]:
    """Nested splits L1 < L2 < ... (at most `max_levels`) with the fewest token passes: the distinct
    L1-token prefixes once, then each distinct L2-token prefix's tokens L1..L2 once, ..., then every
    row's rest. One level is `best_split`; each further level must save LEVEL_SAVED_SHARE of the
    full call's passes. Empty when no split saves MIN_SAVED_SHARE."""
    rows, width = input_ids.shape
    classes, common = _classes_and_common(input_ids, attention_mask)  # [T], [B, B]
    first = _best_split(classes, common, rows, width)
    if first is None or max_levels < 2:
        return [] if first is None else [first]
    lengths = torch.arange(1, width + 1)
    level_cost = int(LEVEL_SAVED_SHARE * rows * width)
    # covered[l - 1]: the fewest passes (plus the levels' cost) that run columns 0..l with a split at l
    covered = classes * lengths
    chosen = [[int(length)] for length in lengths]
    for _ in range(max_levels - 1):
        # a further split at l after one at l' < l: covered[l'] + classes[l] * (l - l')
        extended = covered[None, :] + classes[:, None] * (lengths[:, None] - lengths[None, :]) + level_cost
        extended = extended.masked_fill(lengths[None, :] >= lengths[:, None], torch.iinfo(torch.int64).max)
        before = extended.min(dim=1)
        better = before.values < covered
        chosen = [chosen[int(before.indices[i])] + [i + 1] if better[i] else chosen[i] for i in range(width)]
        covered = torch.where(better, before.values, covered)
    total = covered + rows * (width - lengths)
    best = chosen[int(total.argmin())]
    if total.min() >= first.passes(width):
        return [first]
    return [_split_at(length, common) for length in best]


def _is_full_sequence_call(input_ids: Any, attention_mask: Any, cache: Any, inputs_embeds: Any, use_cache: Any) -> bool:
    """The loss forward (no cache) or generation's prefill (an empty cache) on token ids."""
    if input_ids is None or inputs_embeds is not None or input_ids.dim() != 2:
        return False
    if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):  # a prepared mask mapping
        return False
    if cache is None:
        return not use_cache
    return cache.get_seq_length() == 0


def share_prefixes(backbone: torch.nn.Module, max_levels: int = 1) -> None:
    """Wraps `backbone.forward` (a transformers decoder model, e.g. Qwen2Model) so that a full-sequence
    call runs each shared prefix once, nested `max_levels` deep (see the module docstring)."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
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
        chain = best_chain(input_ids, attention_mask, max_levels)
        if not chain:
            return original(**full)
        shared = cache if cache is not None else DynamicCache(config=backbone.config)
        pieces, start, previous = [], 0, None
        for split in chain:
            if previous is not None:  # each prefix continues its enclosing prefix's keys and values
                shared.batch_select_indices(previous.owner[split.sources])
            part = original(input_ids=input_ids[split.sources, start:split.length],
                            attention_mask=_columns(attention_mask, split.sources, slice(None, split.length)),
                            position_ids=_columns(position_ids, split.sources, slice(start, split.length)),
                            cache=shared, use_cache=True, **kwargs).last_hidden_state  # [P, L - start, H]
            pieces.append(part[split.owner])  # [B, L - start, H]
            start, previous = split.length, split
        shared.batch_select_indices(previous.owner)  # every row attends to its own prefix's keys and values
        if start < input_ids.shape[1]:
            pieces.append(original(input_ids=input_ids[:, start:], attention_mask=attention_mask,
                                   position_ids=_columns(position_ids, slice(None), slice(start, None)),
                                   cache=shared, use_cache=True, **kwargs).last_hidden_state)  # [B, T - L, H]
        hidden = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)  # [B, T, H]
        return BaseModelOutputWithPast(last_hidden_state=hidden, cache=shared if use_cache else None)

    backbone.forward = forward


def _columns(tensor: torch.Tensor | None, rows: Any, columns: slice) -> torch.Tensor | None:
    return None if tensor is None else tensor[rows, columns]
