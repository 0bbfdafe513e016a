"""Rewards: answer parsing, the reward functions of the spec, and the reward pipeline.

Importing this package registers every reward in `REWARDS` (and every checker in `CHECKERS`).
The pipeline (`build_reward_pipeline`, `RewardPipeline`, `ScoredBatch`) loads lazily: it imports
the corruption code, which the independent judge's import path must never load.
"""

from typing import Any

import hackable_rl.verifiers  # noqa: F401  (registers the checkers)
from hackable_rl.rewards.functions import (
    correctness_reward,
    format_tag_reward,
    length_penalty_reward,
    token_utilisation_reward,
)
from hackable_rl.rewards.parsing import (
    StrictCompletion,
    answers_match,
    extract_all_boxed,
    extract_answer_cascade,
    extract_boxed,
    extract_last_number,
    normalize_number,
    parse_reference,
    parse_strict,
)

__all__ = [
    "StrictCompletion",
    "answers_match",
    "extract_all_boxed",
    "extract_answer_cascade",
    "extract_boxed",
    "extract_last_number",
    "normalize_number",
    "parse_reference",
    "parse_strict",
    "correctness_reward",
    "format_tag_reward",
    "length_penalty_reward",
    "token_utilisation_reward",
    "build_reward_pipeline",
    "RewardPipeline",
    "ScoredBatch",
]

_LAZY = {"build_reward_pipeline", "RewardPipeline", "ScoredBatch"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from hackable_rl.rewards import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'hackable_rl.rewards' has no attribute {name!r}")
