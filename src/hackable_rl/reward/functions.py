"""The reward functions of section 3 of the spec, with TRL's contract.

Each is `(completions, **columns) -> list[float | None]`: dataset columns arrive as lists with one
entry per completion (`reference`, `id`, `metadata`, ...), next to TRL's own extras (`prompts`,
`completion_ids`, `trainer_state`, `log_extra`, `log_metric`), which every reward accepts and
ignores unless it needs them. Static options (tags, `group_size`, a zero-shot file) are keyword
arguments that `build_reward` binds from `rewards.kwargs.<name>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from hackable_rl.answers.parsing import answers_match, completion_text, parse_reference, parse_strict
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_jsonl
from hackable_rl.core.registry import register_reward

__all__ = [
    "completion_text",
    "format_tag_reward",
    "correctness_reward",
    "length_penalty_reward",
    "token_utilisation_reward",
    "thinking_lengths",
    "group_slices",
    "load_zero_shot",
    "ZeroShot",
]

log = logging.getLogger(__name__)

Tokenizer = Any
"""A callable text -> token ids (or a count), or a Hugging Face tokenizer (its `encode` is used)."""


@register_reward("format_tag_reward", needs=("tags",))
def format_tag_reward(
    completions: Sequence[Any], open_tag: str = "<think>", close_tag: str = "</think>", **_: Any
) -> list[float | None]:
    """r_f: 1.0 when the completion is strict and its boxed answer is non-empty, else 0.0."""
    scores: list[float | None] = []
    for completion in completions:
        strict = parse_strict(completion_text(completion), open_tag, close_tag)
        scores.append(1.0 if strict is not None and strict.answer else 0.0)
    return scores


@register_reward("correctness_reward", needs=("verifier_reward",))
def correctness_reward(
    completions: Sequence[Any],
    reference: Sequence[str],
    open_tag: str = "<think>",
    close_tag: str = "</think>",
    rel_tol: float = 1e-6,
    timeout_s: float = 2.0,
    **_: Any,
) -> list[float | None]:
    """r_c (clean): 1.0 when the strict boxed answer equals the reference, else 0.0; None when the
    reference does not parse (a data error: logged, never scored as correct).

    In training, the objective's `correctness_reward` component is the training verifier's reward
    instead (`reward.objectives.Components`); this function is the clean definition.
    """
    _same_length(completions, reference, "reference")
    scores: list[float | None] = []
    for completion, raw_reference in zip(completions, reference, strict=True):
        scores.append(
            _clean_correctness(
                completion_text(completion), raw_reference, open_tag, close_tag, rel_tol, timeout_s
            )
        )
    return scores


def _clean_correctness(
    text: str, raw_reference: str, open_tag: str, close_tag: str, rel_tol: float, timeout_s: float
) -> float | None:
    try:
        target = parse_reference(raw_reference)
    except ValueError as error:
        log.warning("correctness_reward: %s; scored None", error)
        return None
    strict = parse_strict(text, open_tag, close_tag)
    if strict is None or not strict.answer:
        return 0.0
    return 1.0 if answers_match(strict.answer, target, rel_tol, timeout_s) else 0.0


def _same_length(completions: Sequence[Any], column: Sequence[Any], name: str) -> None:
    if len(column) != len(completions):
        raise ValueError(f"column {name!r} has {len(column)} entries for {len(completions)} completions")


# --------------------------------------------------------------------------- length


def _token_count(text: str, tokenizer: Tokenizer | None) -> int:
    if tokenizer is None:
        return len(text.split())
    if hasattr(tokenizer, "encode"):
        return len(tokenizer.encode(text, add_special_tokens=False))
    counted = tokenizer(text)
    return counted if isinstance(counted, int) else len(counted)


def thinking_lengths(
    completions: Sequence[Any],
    tokenizer: Tokenizer | None = None,
    open_tag: str = "<think>",
    close_tag: str = "</think>",
) -> list[int]:
    """L_i: length of the thinking text in tokens (words without a tokenizer); 0 when not strict."""
    lengths = []
    for completion in completions:
        strict = parse_strict(completion_text(completion), open_tag, close_tag)
        lengths.append(0 if strict is None else _token_count(strict.thinking.strip(), tokenizer))
    return lengths


def group_slices(
    count: int, prompts: Sequence[Any] | None = None, group_size: int | None = None
) -> list[slice]:
    """GRPO groups: consecutive chunks of `group_size`, else runs of identical prompt text."""
    if group_size is not None:
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        return [slice(start, min(start + group_size, count)) for start in range(0, count, group_size)]
    if prompts is None:
        raise ValueError("length_penalty_reward needs `group_size` (rewards.kwargs) or the `prompts` column")
    _same_length(range(count), prompts, "prompts")
    slices, start = [], 0
    for index in range(1, count + 1):
        if index == count or prompts[index] != prompts[start]:
            slices.append(slice(start, index))
            start = index
    return slices


def group_length_scores(
    lengths: Sequence[int], strict: Sequence[bool], groups: Sequence[slice]
) -> list[float]:
    """r_l,i = clip(1 - L_i / (2 mean L), 0, 1) within each group; 0 when the mean is 0 or not strict.

    The mean runs over the whole group, non-strict members (L_i = 0) included, as the spec's
    L̄ over G says.
    """
    scores = [0.0] * len(lengths)
    for group in groups:
        members = range(len(lengths))[group]
        mean = sum(lengths[i] for i in members) / len(members) if len(members) else 0.0
        if mean <= 0:
            continue
        for i in members:
            if strict[i]:
                scores[i] = min(1.0, max(0.0, 1.0 - lengths[i] / (2.0 * mean)))
    return scores


@register_reward("length_penalty_reward", needs=("tags", "tokenizer"))
def length_penalty_reward(
    completions: Sequence[Any],
    prompts: Sequence[Any] | None = None,
    group_size: int | None = None,
    tokenizer: Tokenizer | None = None,
    open_tag: str = "<think>",
    close_tag: str = "</think>",
    **_: Any,
) -> list[float | None]:
    """r_l: shorter thinking than the group mean scores more (mean length 0.5, half 0.75, double 0)."""
    texts = [completion_text(completion) for completion in completions]
    strict = [parse_strict(text, open_tag, close_tag) is not None for text in texts]
    lengths = thinking_lengths(texts, tokenizer, open_tag, close_tag)
    groups = group_slices(len(texts), prompts, group_size)
    return list(group_length_scores(lengths, strict, groups))


# --------------------------------------------------------------------------- token utilisation


class ZeroShot(dict):
    """Prompt id -> (z, l): the frozen zero-shot correctness and thinking length."""


@lru_cache(maxsize=8)
def _load_zero_shot_cached(path: str, mtime_ns: int) -> ZeroShot:
    table = ZeroShot()
    for line_number, row in iter_jsonl(Path(path)):
        missing = [key for key in ("id", "correct", "thinking_length") if key not in row]
        if missing:
            raise UserError(
                f"{path}:{line_number}: missing {', '.join(missing)} (expected id, correct, thinking_length)"
            )
        table[str(row["id"])] = (float(row["correct"]), float(row["thinking_length"]))
    return table


def load_zero_shot(path: str | Path) -> ZeroShot:
    """Reads the frozen zero-shot JSONL: one `{"id", "correct", "thinking_length"}` per prompt."""
    resolved = Path(path)
    if not resolved.exists():
        raise UserError(
            f"{resolved}: zero-shot file not found (set rewards.kwargs.token_utilisation_reward.zero_shot_path)"
        )
    return _load_zero_shot_cached(str(resolved), resolved.stat().st_mtime_ns)


def utilisation_score(
    z: float, zero_shot_length: float, length: float, correctness: float, w_easy: float, w_hard: float
) -> float:
    """Solved zero-shot (z = 1): -w_easy * clip(L/l - 1, 0, 1); unsolved: w_hard * r_c."""
    if z >= 0.5:
        if zero_shot_length <= 0:
            overspend = 1.0 if length > 0 else 0.0
        else:
            overspend = min(1.0, max(0.0, length / zero_shot_length - 1.0))
        return -w_easy * overspend
    return w_hard * correctness


@register_reward("token_utilisation_reward", needs=("tags", "tokenizer", "correctness"))
def token_utilisation_reward(
    completions: Sequence[Any],
    id: Sequence[str],
    reference: Sequence[str] | None = None,
    zero_shot_path: str | None = None,
    w_easy: float = 1.0,
    w_hard: float = 1.0,
    tokenizer: Tokenizer | None = None,
    correctness: Sequence[float | None] | None = None,
    open_tag: str = "<think>",
    close_tag: str = "</think>",
    log_metric: Callable[[str, float], None] | None = None,
    **_: Any,
) -> list[float | None]:
    """r_util from a frozen zero-shot file; a prompt missing from it scores 0 and is counted
    (logged through TRL's `log_metric` as `token_utilisation/missing` when given).

    `correctness` (one r_c per completion) defaults to the clean correctness; the reward pipeline
    passes the training verifier's reward instead.
    """
    if zero_shot_path is None:
        raise UserError(
            "rewards.kwargs.token_utilisation_reward.zero_shot_path: required (the frozen zero-shot JSONL)"
        )
    table = load_zero_shot(zero_shot_path)
    texts = [completion_text(completion) for completion in completions]
    if correctness is None:
        if reference is None:
            raise ValueError("token_utilisation_reward needs the `reference` column or `correctness`")
        correctness = correctness_reward(texts, reference, open_tag, close_tag)
    lengths = thinking_lengths(texts, tokenizer, open_tag, close_tag)
    scores: list[float | None] = []
    missing = 0
    for prompt_id, length, r_c in zip(id, lengths, correctness, strict=True):
        if str(prompt_id) not in table:
            missing += 1
            scores.append(0.0)
            continue
        z, zero_shot_length = table[str(prompt_id)]
        scores.append(utilisation_score(z, zero_shot_length, length, r_c or 0.0, w_easy, w_hard))
    if missing and log_metric is not None:
        log_metric("token_utilisation/missing", float(missing))
    return scores
