"""The reward sections of the experiment config: reward options, the objective, the training
verifier's members and the corruption that wraps them (re-exported by `hackable_rl.config.experiment`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from hackable_rl.config.field_types import Tag
from hackable_rl.config.section import Section
from hackable_rl.core.bounds import (
    FiniteFloat,
    Probability,
    Seed,
    TimeoutSeconds,
    UnitFloat,
)

__all__ = ["CorruptionConfig", "ObjectiveConfig", "RewardsConfig", "VerifierConfig", "VerifierMember"]


# --------------------------------------------------------------------------- rewards / objective


class RewardsConfig(Section):
    think_open: Tag = "<think>"
    """Opening tag of the thinking block."""
    think_close: Tag = "</think>"
    """Closing tag of the thinking block."""
    rel_tol: UnitFloat = 1e-6
    """Relative tolerance of numeric answer comparison."""
    math_verify_timeout_s: TimeoutSeconds = 2.0
    """Per-call timeout of math-verify for non-numeric answers."""
    kwargs: dict[str, dict[str, Any]] = {}
    """Static options per reward, partially applied by `build_reward` (e.g. length_penalty_reward.group_size)."""

    @model_validator(mode="after")
    def _tags_differ(self) -> RewardsConfig:
        if self.think_open == self.think_close:
            raise ValueError(f"rewards.think_close: {self.think_close!r} is also think_open; the block has no end")
        return self


class ObjectiveConfig(Section):
    name: str = "token_grpo"
    """Registered objective (token_grpo, latent_neuralese)."""
    class_path: str | None = None
    """`package.module:Class` of an external objective; overrides `name`."""
    mode: Literal["additive", "weighted_length_penalty"] = "additive"
    """How the rewards combine into one scalar per completion."""
    rewards: list[str] = ["format_tag_reward", "correctness_reward"]
    """Rewards enabled in the objective (additive mode sums these)."""
    correctness_weight: FiniteFloat = 1.0
    """weighted_length_penalty: weight of r_c."""
    length_penalty_lambda: FiniteFloat = 0.0
    """weighted_length_penalty: weight of the correctness-length interaction."""
    length_penalty_interaction: Literal["correctness_length", "correctness_length_format"] = "correctness_length"
    """Interaction I = r_c * r_l, or r_c * r_l * r_f."""
    strict_format_gate: bool = False
    """A completion with r_f <= 0.5 gets `non_strict_penalty` instead of its combined reward."""
    non_strict_penalty: FiniteFloat = -1.0
    """Reward of a non-strict completion under the gate."""


# --------------------------------------------------------------------------- verifier / corruption

class VerifierMember(Section):
    name: str
    """Member name (keys the corruption hash and the generation records)."""
    checker: str = "clean"
    """A registered checker or `package.module:checker`; `hackable-rl validate` checks the name."""
    checker_kwargs: dict[str, Any] = {}
    """The checker's own settings (its keyword parameters after `options`), checked against its
    signature when the config's names resolve (docs/extending.md)."""
    corrupted: bool = True
    """Pass this member through the configured corruption channel."""
    noise_rates: tuple[Probability, Probability] | None = None
    """This member's known (rho0, rho1) (P pays a wrong answer, P denies a right one), for a flawed
    checker no channel knows, read by a method that corrects for known rates; null: the channel's
    rates if corrupted, else (0, 0)."""


class VerifierConfig(Section):
    members: list[VerifierMember] = [VerifierMember(name="m0")]
    """Ensemble members (at least one)."""
    aggregation: str = "mean"
    """How member rewards combine into r: a registered aggregation or `package.module:function`."""

    @model_validator(mode="after")
    def _members_are_named_once(self) -> VerifierConfig:
        if not self.members:
            raise ValueError("verifier.members: [] is empty; list at least one member")
        names = [member.name for member in self.members]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"verifier.members: names {repeated} repeat; each member needs its own name")
        return self


def _number(value: Any) -> str:
    """`0.3` for a number (as `:g` writes it); anything else as it is (the channel refuses it later)."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


class CorruptionConfig(Section):
    channel: str = "flip"
    """Corruption channel applied to every member marked `corrupted`: none, a registered channel
    (`hackable-rl validate` lists them) or `package.module:factory`."""
    rate: Probability = 0.2
    """The headline knob: the probability of the configured channel (sigma for `noise`)."""
    kwargs: dict[str, Any] = {}
    """The channel's own settings, checked against its signature when the config's names resolve
    (docs/methodology.md lists the built-ins')."""
    seed: Seed | None = None
    """Corruption hash seed in [0, 2**32 - 1]; null uses the top-level seed."""
    draw: Literal["independent", "shared"] = "independent"
    """How corrupted members draw the channel: independent (each member's own hash stream, so at rate p
    all of three fire together with probability p^3) or shared (one draw per completion for every
    member: the same input fools all of them, as a blind spot shared by verifiers built alike)."""

    @property
    def label(self) -> str:
        """`r<rate>`, and `-fp<fpr>-fn<fnr>` when the channel is given its rates directly (two such
        runs share their rate whenever they share J, so the rate alone would not tell them apart)."""
        direct = {key: self.kwargs[key] for key in ("fpr", "fnr") if key in self.kwargs}
        return f"r{self.rate:g}" + "".join(f"-{key[:2]}{_number(value)}" for key, value in direct.items())
