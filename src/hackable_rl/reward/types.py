"""The reward's small value types: an example to check, a member's verdict, the checker signature,
what a method hands back, and the independent judge's verdict that the records carry beside them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Verdict", "Example", "Checker", "MemberVerdict", "Optimised", "Judgment"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One member's judgement of one completion."""

    reward: float | None
    """In [0, 1], or None when the member cannot score it (missing)."""
    confidence: float
    """In [0, 1]: how sure the member says it is."""
    parsed: str | None
    """The answer the member read from the completion (None when it read none)."""
    reason: str
    """Short machine-readable why: correct, wrong, not_strict, empty_box, flipped, ..."""


@dataclass(frozen=True, slots=True)
class Example:
    """What a checker may know about a prompt: never shown to the policy."""

    id: str
    """Stable prompt id (keys corruption hashes)."""
    reference: str
    """Reference answer: bare (`72`), GSM8K (`... #### 72`) or a MATH solution with `\\boxed{}`."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Source, level, n_steps... (bias selectors read this)."""


Checker = Callable[[str, Example], Verdict]
"""A checker maps (completion text, example) to a Verdict. Corruption wraps one and returns one."""


MEMBER_FIELDS = ("clean_reward", "clean_confidence", "reward", "confidence", "parsed", "reason")


class MemberVerdict(NamedTuple):
    """One ensemble member's verdict before (`clean`) and after (`seen`) its corruption channel.
    (A NamedTuple, not a frozen dataclass: a batch builds M of these per completion.)"""

    name: str
    clean: Verdict
    seen: Verdict

    def to_json(self) -> dict[str, Any]:
        clean, seen = self.clean, self.seen
        values = (clean.reward, clean.confidence, seen.reward, seen.confidence, seen.parsed, seen.reason)
        return {f"member.{self.name}.{field}": value for field, value in zip(MEMBER_FIELDS, values, strict=True)}


@dataclass(frozen=True)
class Optimised:
    """What a method hands back: the reward training optimises and the columns it computed on the way
    (the robust shaping's `robust_aggregate` and `shaped`), which the records keep as they are."""

    reward: np.ndarray
    """[N] the optimised reward (NaN = missing)."""
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    """name -> [N]: written into each record under its name, after the disagreement measures."""

    @classmethod
    def of(cls, returned: Any) -> Optimised:
        """A method's return value as Optimised: a plain array (a method that computes nothing else) is
        its optimised reward."""
        if isinstance(returned, Optimised):
            return returned
        return cls(np.asarray(returned, dtype=float))


@dataclass(frozen=True)
class Judgment:
    """The independent judge's view of one completion (`evaluation.judge` gives it; the records carry
    it beside the reward, never into it).

    correct: True/False, or None when the reference could not be parsed (not judged).
    parsed: the answer extracted from the completion, None when there was none.
    reason: one short phrase saying why (e.g. "match", "no strict format", "unparseable reference: ...").
    """

    correct: bool | None
    parsed: str | None
    reason: str
