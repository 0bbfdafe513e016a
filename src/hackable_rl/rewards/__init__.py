"""Rewards: pure reward functions with TRL's contract `(completions, **columns) -> list[float | None]`.

Importing this package registers every reward in `REWARDS`. Answer parsing lives in
`hackable_rl.answers`; the training verifier's verdicts in `hackable_rl.verifiers`; the module that
combines verdicts, shaping and objective into the reward TRL sees is `hackable_rl.scoring.pipeline`.
"""

from hackable_rl.rewards.functions import (
    correctness_reward,
    format_tag_reward,
    length_penalty_reward,
    token_utilisation_reward,
)

__all__ = [
    "correctness_reward",
    "format_tag_reward",
    "length_penalty_reward",
    "token_utilisation_reward",
]
