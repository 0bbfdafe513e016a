"""The training verifier's members, the first two steps of the reward (`pipeline.py`).

Per batch every member checks every completion (`check`: its clean verdict); its corruption
channel, when the member is marked `corrupted`, turns that into the verdict training sees
(`corrupt`). The ensemble (`ensemble.combine`) then aggregates the seen rewards and measures their
disagreement, for every method alike. Each member's known noise rates are read once, here.
"""

from __future__ import annotations

from dataclasses import dataclass

from hackable_rl.reward.channels import Channel
from hackable_rl.reward.checkers import CheckerOptions, build_checker, checker_settings
from hackable_rl.reward.corruption import KeyedChannel, build_channel, corruption_key
from hackable_rl.reward.ensemble import Rates
from hackable_rl.reward.types import Checker, Example, Verdict

__all__ = ["Member", "TrainingVerifier", "build_members", "member_noise_rates"]


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


class TrainingVerifier:
    """The configured members, built once: `check` gives their clean verdicts, `corrupt` the verdicts
    training sees."""

    def __init__(self, config):
        channel = build_channel(config.corruption, CheckerOptions.from_config(config))
        self.members = build_members(config, channel)
        self.names = tuple(member.name for member in self.members)
        self.noise_rates = tuple(member_noise_rates(config, channel))
        self.aggregation = config.verifier.aggregation

    def check(self, texts: list[str], examples: list[Example]) -> list[list[Verdict]]:
        """[M][N] each member's clean verdict of each completion. Members that share a checker (and its
        settings) share its verdicts: checkers are deterministic."""
        by_checker: dict[tuple[str, str], list[Verdict]] = {}
        for member in self.members:
            key = (member.checker_name, member.settings)
            if key not in by_checker:
                by_checker[key] = [member.checker(text, example) for text, example in zip(texts, examples, strict=True)]
        return [by_checker[(member.checker_name, member.settings)] for member in self.members]

    def corrupt(self, clean: list[list[Verdict]], texts: list[str], examples: list[Example]) -> list[list[Verdict]]:
        """[M][N] the verdicts training sees: each corrupted member's clean verdicts through its keyed
        channel (the per-completion half of the hash computed once for all members), the others' as
        they are."""
        if all(member.channel is None for member in self.members):
            return clean
        keys = [corruption_key(example.id, text) for text, example in zip(texts, examples, strict=True)]
        return [verdicts if member.channel is None else member.channel.corrupt_batch(verdicts, texts, examples, keys)
                for member, verdicts in zip(self.members, clean, strict=True)]
