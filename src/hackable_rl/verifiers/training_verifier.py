"""The training verifier: its members' verdicts, their aggregate and disagreement.

Per batch every member checks every completion (its clean verdict); its corruption channel, when
the member is marked `corrupted`, turns that into the verdict training sees. The members' seen
rewards then aggregate (`verifier.aggregation`) and their disagreement is measured, for every method
alike: the method (`hackable_rl.methods`) makes what is optimised from them (`robust` its shaping,
`corrected` its correction), and the records keep every quantity whichever it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hackable_rl.verifiers.checkers import CheckerOptions, build_checker, checker_settings
from hackable_rl.verifiers.corruption import Channel, KeyedChannel, build_channel, corruption_key
from hackable_rl.verifiers.ensemble import Disagreement, aggregate, disagreement
from hackable_rl.verifiers.types import Checker, Example, Verdict

__all__ = ["Member", "EnsembleRewards", "TrainingVerifier", "build_members", "member_noise_rates"]

Rates = tuple[float | None, float | None]
"""(rho0, rho1): P(a wrong answer is paid), P(a right one is denied); None where unknown."""


@dataclass(frozen=True)
class Member:
    """One ensemble member: a checker and, when corrupted, its keyed channel."""

    name: str
    checker_name: str
    checker: Checker
    channel: KeyedChannel | None
    settings: str = ""
    """The checker's settings, as text: members share clean verdicts only under the same ones."""


SHARED_DRAW = "shared"
"""The hash key every member draws under with `corruption.draw: shared` (one draw per completion)."""


def build_members(config, channel: Channel | None) -> list[Member]:
    """The configured members, each corrupted by `channel` (the configured one, `build_channel`) when
    marked `corrupted`; under `corruption.draw: shared` all of them draw it with one key, so they fire
    together."""
    options = CheckerOptions.from_config(config)
    shared = config.corruption.draw == "shared"
    members = []
    for member in config.verifier.members:
        key = SHARED_DRAW if shared else member.name
        keyed = KeyedChannel(channel, config.corruption_seed, key) if channel and member.corrupted else None
        settings = checker_settings(member.checker, member.checker_kwargs)
        checker = build_checker(member.checker, options, **settings)
        members.append(Member(member.name, member.checker, checker, keyed, repr(sorted(settings.items()))))
    return members


def channel_rates(channel: Channel | None, given: Rates = (None, None)) -> Rates:
    """A corrupted member's (rho0, rho1): each `given` rate where set, else the channel's
    `noise_rates()` where it knows them ((0, 0) without a channel)."""
    rho0, rho1 = given
    if rho0 is not None and rho1 is not None:
        return rho0, rho1
    known = (0.0, 0.0) if channel is None else channel.noise_rates()
    if known is None:
        return rho0, rho1
    return (known[0] if rho0 is None else rho0), (known[1] if rho1 is None else rho1)


def member_noise_rates(config, channel: Channel | None, given: Rates = (None, None)) -> list[Rates]:
    """Each member's (rho0, rho1): its own `noise_rates` where set (a systematic blind spot), else the
    channel's (`channel_rates`, with the `given` rates in front) when corrupted, else (0, 0): a member
    never corrupted is taken at its word."""
    corrupted = channel_rates(channel, given)
    return [tuple(member.noise_rates) if member.noise_rates is not None else corrupted if member.corrupted
            else (0.0, 0.0) for member in config.verifier.members]


@dataclass(frozen=True)
class EnsembleRewards:
    """The training verifier's output for a batch of N completions (arrays are [N]; NaN = missing)."""

    names: tuple[str, ...]
    """The members, in config order."""
    clean: list[list[Verdict]]
    """[M][N] each member's verdict before its corruption channel."""
    seen: list[list[Verdict]]
    """[M][N] the verdicts training sees (after corruption)."""
    rewards: np.ndarray
    """[N, M] the members' seen rewards."""
    confidences: np.ndarray
    """[N, M] the members' seen confidences."""
    aggregate: np.ndarray
    """r: the seen rewards aggregated by `verifier.aggregation` (the observed reward)."""
    spread: Disagreement
    noise_rates: tuple[Rates, ...]
    """[M] each member's known (rho0, rho1) (`member_noise_rates`), read once when the verifier is built."""


class TrainingVerifier:
    """The configured ensemble, built once: `verify(texts, examples) -> EnsembleRewards`."""

    def __init__(self, config):
        channel = build_channel(config.corruption, CheckerOptions.from_config(config))
        self.members = build_members(config, channel)
        self.noise_rates = tuple(member_noise_rates(config, channel))
        self.aggregation = config.verifier.aggregation

    def verify(self, texts: list[str], examples: list[Example]) -> EnsembleRewards:
        per_member = self._member_verdicts(texts, examples)  # [M] (clean [N], seen [N])
        clean = [clean for clean, _ in per_member]
        seen = [seen for _, seen in per_member]
        rewards = _matrix([[verdict.reward for verdict in verdicts] for verdicts in seen])
        confidences = _matrix([[verdict.confidence for verdict in verdicts] for verdicts in seen])
        spread = disagreement(rewards, confidences)
        return EnsembleRewards(
            names=tuple(member.name for member in self.members),
            clean=clean,
            seen=seen,
            rewards=rewards,
            confidences=confidences,
            aggregate=aggregate(rewards, confidences, self.aggregation),
            spread=spread,
            noise_rates=self.noise_rates,
        )

    def _member_verdicts(self, texts: list[str], examples: list[Example]) -> list[tuple[list[Verdict], list[Verdict]]]:
        """Per member: (clean verdicts, verdicts after corruption), one per completion.

        Members that share a checker share its clean verdicts (checkers are deterministic), and the
        per-completion half of the corruption hash is computed once for all members.
        """
        clean_by_checker: dict[tuple[str, str], list[Verdict]] = {}
        keys = None
        out = []
        for member in self.members:
            clean = clean_by_checker.get((member.checker_name, member.settings))
            if clean is None:
                clean = [member.checker(text, example) for text, example in zip(texts, examples, strict=True)]
                clean_by_checker[(member.checker_name, member.settings)] = clean
            if member.channel is None:
                out.append((clean, clean))
                continue
            if keys is None:
                keys = [corruption_key(example.id, text) for text, example in zip(texts, examples, strict=True)]
            out.append((clean, member.channel.corrupt_batch(clean, texts, examples, keys)))
        return out


def _matrix(per_member: list[list[float | None]]) -> np.ndarray:
    """[M][N] lists (None -> NaN) -> [N, M] array."""
    return np.array(per_member, dtype=float).reshape(len(per_member), -1).T
