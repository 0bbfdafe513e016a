"""Corruption, the reward's second step: a member's clean verdicts through its channel (what each
channel does: `channels.py`), keyed, and the channels built from the config (`CHANNELS`).

A channel wraps a checker and returns a checker with the same signature.

A channel never edits a checker and never draws from a shared random stream. Every decision is a
pure function of a hash of (seed, member name, example id, completion text), so an identical
completion of an identical prompt gets the identical corruption whatever the batch order, the
batch size, the process or the resume point. Two uniforms come from one 128-bit BLAKE2b digest:
`u` decides whether the channel fires, `v` supplies any value it needs (noise, a new confidence).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from hackable_rl.core.bounds import NonNegativeFloat, Probability
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import CHANNELS, CHECKERS, RegistryError, register_channel
from hackable_rl.core.settings import bind_settings
from hackable_rl.reward.channels import Asymmetric, Bias, Channel, ConfidenceDrop, Flaw, Flip, Missing, Noise
from hackable_rl.reward.checkers import CheckerOptions, build_checker
from hackable_rl.reward.selector import Selector
from hackable_rl.reward.types import Checker, Example, Verdict

__all__ = ["CHANNELS", "KeyedChannel", "build_channel", "channel_settings", "configured_flaw", "corrupt", "corruption_key",
           "corruption_uniforms"]

_SCALE = 2.0**-53
_LOW64 = (1 << 64) - 1


def corruption_key(example_id: str, completion: str) -> bytes:
    """The per-completion half of the hash input (shared by every member of a batch)."""
    return f"{example_id}\x1f".encode() + completion.encode()


def _uniforms(member_prefix: bytes, key: bytes) -> tuple[float, float]:
    digest = int.from_bytes(blake2b(member_prefix + key, digest_size=16).digest(), "little")
    return (((digest & _LOW64) >> 11) + 0.5) * _SCALE, ((digest >> 75) + 0.5) * _SCALE


def _member_prefix(seed: int, member: str) -> bytes:
    return f"{seed}\x1f{member}\x1f".encode()


def corruption_uniforms(seed: int, member: str, example_id: str, completion: str) -> tuple[float, float]:
    """Two uniforms in the open interval (0, 1), a pure function of the four keys."""
    return _uniforms(_member_prefix(seed, member), corruption_key(example_id, completion))


@dataclass(frozen=True)
class KeyedChannel:
    """A channel bound to its seed and member name: `(verdict, completion, example) -> Verdict`."""

    channel: Channel
    seed: int
    member: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefix", _member_prefix(self.seed, self.member))

    def __call__(self, verdict: Verdict, completion: str, example: Example) -> Verdict:
        u, v = _uniforms(self._prefix, corruption_key(example.id, completion))
        return self.channel.apply(verdict, u, v, completion, example)

    def corrupt_batch(
        self, verdicts: list[Verdict], completions: list[str], examples: list[Example], keys: list[bytes]
    ) -> list[Verdict]:
        """`self(verdict, completion, example)` for a batch, with `corruption_key`s computed once."""
        apply, prefix = self.channel.apply, self._prefix
        out = []
        for verdict, completion, example, key in zip(verdicts, completions, examples, keys, strict=True):
            u, v = _uniforms(prefix, key)
            out.append(apply(verdict, u, v, completion, example))
        return out


def corrupt(checker: Checker, channel: KeyedChannel) -> Checker:
    """`checker` passed through `channel`: a new checker with the same signature."""

    @functools.wraps(checker)
    def corrupted(completion: str, example: Example) -> Verdict:
        return channel(checker(completion, example), completion, example)

    return corrupted


# --------------------------------------------------------------------------- from config
#
# A channel factory is `factory(rate, options, **settings) -> Channel`, registered in CHANNELS. Its
# settings come from `corruption.kwargs` and are checked against its own signature (names, types,
# ranges) by `build_channel`, so each channel's settings live with the channel.


def _scaled(rate: float, scale: float) -> float:
    return min(1.0, rate * scale)


@register_channel("flip", restates_accuracy=True)
def flip(rate: float, options: CheckerOptions) -> Flip:
    """r -> 1 - r with probability `rate`."""
    return Flip(rate)


@register_channel("asymmetric")
def asymmetric(
    rate: float,
    options: CheckerOptions,
    fp_scale: NonNegativeFloat = 1.0,
    fn_scale: NonNegativeFloat = 1.0,
    fpr: Probability | None = None,
    fnr: Probability | None = None,
) -> Asymmetric:
    """p_fp = min(1, rate * fp_scale), p_fn = min(1, rate * fn_scale); or, given `fpr` and `fnr`, those
    probabilities directly (the J sweep: Youden's J = 1 - fpr - fnr)."""
    if fpr is None and fnr is None:
        return Asymmetric(_scaled(rate, fp_scale), _scaled(rate, fn_scale))
    return Asymmetric(*direct_rates(rate, fpr, fnr, fp_scale, fn_scale))


def direct_rates(rate: float, fpr: float | None, fnr: float | None, fp_scale: float, fn_scale: float) -> tuple[float, float]:
    """(fpr, fnr) as given, once checked against the other settings. `rate` must be their mean, the flip
    rate with the same J, so a run's rate still names how noisy it is and rate 0 still means clean."""
    if fpr is None or fnr is None:
        raise UserError("corruption.kwargs: fpr and fnr go together (give both, e.g. fpr: 0.3, fnr: 0.1)")
    if (fp_scale, fn_scale) != (1.0, 1.0):
        raise UserError("corruption.kwargs: fpr/fnr give the rates directly; drop fp_scale and fn_scale")
    if abs(rate - (fpr + fnr) / 2) > 1e-9:
        raise UserError(f"corruption.rate: {rate:g} with fpr {fpr:g} and fnr {fnr:g}; it must be their mean, "
                        f"{(fpr + fnr) / 2:g} (the flip rate with the same Youden's J)")
    return fpr, fnr


@register_channel("missing")
def missing(rate: float, options: CheckerOptions) -> Missing:
    """The reward is missing with probability `rate`."""
    return Missing(rate)


@register_channel("noise")
def noise(rate: float, options: CheckerOptions) -> Noise:
    """r + N(0, sigma = rate), clipped to [0, 1]."""
    return Noise(rate)


@register_channel("bias")
def bias(
    rate: float,
    options: CheckerOptions,
    selector: str = "n_steps >= 3",
    fp_scale: NonNegativeFloat = 1.0,
    fn_scale: NonNegativeFloat = 1.0,
) -> Bias:
    """asymmetric, only on examples whose metadata matches `selector` (`<key> <op> <value>`)."""
    return Bias(
        Selector.parse(selector, "corruption.kwargs.selector"), _scaled(rate, fp_scale), _scaled(rate, fn_scale)
    )


@register_channel("confidence")
def confidence(rate: float, options: CheckerOptions, confidence_floor: Probability = 0.2) -> ConfidenceDrop:
    """With probability `rate` the confidence drops into [confidence_floor, 1)."""
    return ConfidenceDrop(rate, confidence_floor)


@register_channel("flaw")
def flaw(rate: float, options: CheckerOptions, flaw: str = "any_box") -> Flaw:
    """With probability `rate` the member answers as the flawed checker `flaw`."""
    return Flaw(rate, build_checker(flaw, options), flaw, CHECKERS.get(flaw).superset_of_clean)


def configured_flaw(corruption) -> str | None:
    """The flawed checker a `flaw` channel mixes in (its `kwargs.flaw`, else the factory's default);
    None for any other channel. Study cells and the payoff table name their condition by it."""
    if corruption.channel != "flaw":
        return None
    return corruption.kwargs.get("flaw", inspect.signature(flaw).parameters["flaw"].default)


def channel_settings(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`corruption.kwargs` checked against channel `name`'s signature: unknown names (with the nearest
    allowed one), wrong types and out-of-range values are UserErrors naming `corruption.kwargs.<key>`."""
    return bind_settings(CHANNELS.get(name).function, kwargs, "corruption.kwargs", skip=2)


def build_channel(corruption, options: CheckerOptions) -> Channel | None:
    """The channel `corruption.channel` configures at `corruption.rate`; None for `none`."""
    if corruption.channel == "none":
        return None
    try:
        factory = CHANNELS.get(corruption.channel)
    except RegistryError as error:
        raise UserError(str(error)) from None
    channel = factory(corruption.rate, options, **channel_settings(corruption.channel, corruption.kwargs))
    missing = [name for name in ("apply", "noise_rates") if not hasattr(channel, name)]
    if missing:
        raise UserError(f"corruption.channel: {corruption.channel!r} built {type(channel).__name__}, which has no "
                        f"{' or '.join(missing)}; a channel defines apply(...) and noise_rates() (docs/extending.md)")
    return channel
