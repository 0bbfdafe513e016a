"""One plugin per extension point, loaded as `extension_plugin:<name>` with nothing edited in src/:
a checker, a corruption channel with its own settings, a method with its own config check, a reward
that declares what it needs, an aggregation, a data provider and a report metric. Rewards, checkers
and methods that declare something are exported as their registry's spec (`RewardSpec`,
`CheckerSpec`, `MethodSpec`); a plain function declares nothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hackable_rl.answers import extract_last_number, parse_reference
from hackable_rl.core.registry import CheckerSpec, MethodSpec, RewardSpec
from hackable_rl.data.arith import arith_provider
from hackable_rl.reward import Verdict


def last_number_checker(completion, example, options=None):
    """Accepts any completion whose last number is the reference (a lenient, exploitable checker)."""
    last, target = extract_last_number(completion), parse_reference(example.reference)
    accepted = last is not None and last == target
    return Verdict(1.0 if accepted else 0.0, 1.0, last, "last_number:" + ("match" if accepted else "no_match"))


@dataclass(frozen=True)
class Stubborn:
    """With probability p the member answers `value`, whatever it saw."""

    p: float
    value: float

    def apply(self, verdict, u, v, completion, example):
        if u >= self.p:
            return verdict
        return Verdict(self.value, verdict.confidence, verdict.parsed, f"stubborn:{verdict.reason}")

    def noise_rates(self):
        """Unknown: `value` may be anything in [0, 1]."""
        return None


def stubborn(rate: float, options, value: float = 1.0) -> Stubborn:
    """The channel factory: `corruption.kwargs.value` is this channel's own setting."""
    return Stubborn(rate, value)


last_number = CheckerSpec(last_number_checker, superset_of_clean=False)
"""The same checker as a spec: it pays answers clean refuses *and* refuses some clean pays."""


def _half_penalty(ensemble, config) -> np.ndarray:
    """A method: the aggregate minus half the members' disagreement U."""
    return ensemble.aggregate - 0.5 * ensemble.spread.u


def _two_members_or_more(config) -> list[str]:
    if len(config.verifier.members) > 1:
        return []
    return ["method: extension_plugin:half_penalty needs two members or more (one member never disagrees)"]


half_penalty = MethodSpec(_half_penalty, check_config=_two_members_or_more)


def _closed_think(completions, open_tag="<think>", close_tag="</think>", **columns):
    """0.1 for a completion that closes its thinking block (a toy shaping term)."""
    return [0.1 if open_tag in text and close_tag in text else 0.0 for text in completions]


closed_think_reward = RewardSpec(_closed_think, needs=frozenset({"tags"}))
"""Declares `tags`: the run's rewards.think_open/think_close arrive as open_tag/close_tag."""


def first_member(rewards, confidences) -> np.ndarray:
    """An aggregation: the first member's reward, whatever the others say ([N, M] -> [N])."""
    return rewards[:, 0]


def arith_reversed(config, seed):
    """A data provider: the arith problems with the train split in reverse order."""
    output = arith_provider(config, seed)
    output.train.reverse()
    return output


def boxed_share(records) -> float | None:
    """A report metric: share of evaluated samples that box an answer."""
    return sum("\\boxed{" in r["completion"] for r in records) / len(records) if records else None
