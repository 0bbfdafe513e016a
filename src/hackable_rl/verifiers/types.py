"""The verifier's small value types: an example to check, a verdict, the checker signature."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["Verdict", "Example", "Checker", "MemberVerdict"]


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
