"""What a corruption channel does to a verdict: each channel a small frozen dataclass with
`apply(verdict, u, v, completion, example) -> Verdict` and `noise_rates()` (its binary noise rates,
where it knows them). `u` and `v` are the keyed uniforms `corruption.KeyedChannel` draws: a channel
never draws randomness of its own. `corruption.py` registers a factory for each (`CHANNELS`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Protocol

from hackable_rl.reward.selector import Selector
from hackable_rl.reward.types import Checker, Example, Verdict

__all__ = ["Asymmetric", "Bias", "Channel", "ConfidenceDrop", "Flaw", "Flip", "Missing", "Noise"]

_STANDARD_NORMAL = NormalDist()


class Channel(Protocol):
    """Turns a verdict into a corrupted one, given the two keyed uniforms, and says what it knows of
    its own binary noise rates (the corrected method reads them)."""

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict: ...

    def noise_rates(self) -> tuple[float, float] | None:
        """(rho0, rho1): P(a wrong answer is paid), P(a right one is denied); None when unknown."""
        ...


def _wrong(verdict: Verdict) -> bool:
    return verdict.reward is not None and verdict.reward < 0.5


def _right(verdict: Verdict) -> bool:
    return verdict.reward is not None and verdict.reward >= 0.5


@dataclass(frozen=True, slots=True)
class Flip:
    """r -> 1 - r with probability p (a missing reward stays missing)."""

    p: float

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if verdict.reward is None or u >= self.p:
            return verdict
        return Verdict(1.0 - verdict.reward, verdict.confidence, verdict.parsed, f"flipped:{verdict.reason}")

    def noise_rates(self) -> tuple[float, float]:
        """(rho0, rho1): a wrong answer is paid and a right one denied with the same p."""
        return self.p, self.p


@dataclass(frozen=True, slots=True)
class Asymmetric:
    """A wrong answer is rewarded with probability p_fp; a right one is denied with p_fn."""

    p_fp: float
    p_fn: float

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if _wrong(verdict) and u < self.p_fp:
            return Verdict(1.0, verdict.confidence, verdict.parsed, f"false_positive:{verdict.reason}")
        if _right(verdict) and u < self.p_fn:
            return Verdict(0.0, verdict.confidence, verdict.parsed, f"false_negative:{verdict.reason}")
        return verdict

    def noise_rates(self) -> tuple[float, float]:
        return self.p_fp, self.p_fn


@dataclass(frozen=True, slots=True)
class Missing:
    """The reward is missing with probability p."""

    p: float

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if u >= self.p:
            return verdict
        return Verdict(None, verdict.confidence, verdict.parsed, f"dropped:{verdict.reason}")

    def noise_rates(self) -> tuple[float, float]:
        """A dropped reward is missing, never wrong: no false positive or negative."""
        return 0.0, 0.0


@dataclass(frozen=True, slots=True)
class Noise:
    """r + N(0, sigma), clipped to [0, 1] (a missing reward stays missing)."""

    sigma: float

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if verdict.reward is None or self.sigma <= 0:
            return verdict
        noisy = verdict.reward + self.sigma * _STANDARD_NORMAL.inv_cdf(u)
        return Verdict(
            min(1.0, max(0.0, noisy)), verdict.confidence, verdict.parsed, f"noisy:{verdict.reason}"
        )

    def noise_rates(self) -> None:
        """A continuous reward has no binary noise rates."""
        return None


@dataclass(frozen=True, slots=True)
class Bias:
    """Asymmetric corruption applied only to examples whose metadata matches the selector."""

    selector: Selector
    p_fp: float
    p_fn: float

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if not self.selector.matches(example.metadata):
            return verdict
        return Asymmetric(self.p_fp, self.p_fn).apply(verdict, u, v, completion, example)

    def noise_rates(self) -> None:
        """Unknown: the rates hold only on the examples the selector matches."""
        return None


@dataclass(frozen=True, slots=True)
class ConfidenceDrop:
    """With probability p the member's confidence drops to a value in [floor, 1)."""

    p: float
    floor: float

    def noise_rates(self) -> tuple[float, float]:
        """The reward itself is never changed."""
        return 0.0, 0.0

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if u >= self.p:
            return verdict
        return replace(
            verdict, confidence=self.floor + (1.0 - self.floor) * v, reason=f"unsure:{verdict.reason}"
        )


@dataclass(frozen=True, slots=True)
class Flaw:
    """With probability p the member answers as a flawed checker instead (the flawed-verifier study)."""

    p: float
    checker: Checker
    name: str
    superset_of_clean: bool = False
    """The flawed checker's `CheckerSpec.superset_of_clean`."""

    def apply(self, verdict: Verdict, u: float, v: float, completion: str, example: Example) -> Verdict:
        if u >= self.p:
            return verdict
        flawed = self.checker(completion, example)
        return replace(flawed, reason=f"{self.name}:{flawed.reason}")

    def noise_rates(self) -> tuple[float, float] | None:
        """For a flaw that accepts everything clean accepts (`superset_of_clean`), an upper bound: a
        wrong answer is paid with probability at most p, a right one never denied. Unknown otherwise."""
        return (self.p, 0.0) if self.superset_of_clean else None
