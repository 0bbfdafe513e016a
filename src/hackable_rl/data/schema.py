"""The one sample schema every data provider produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrainingSample:
    """One problem. `reference` travels beside the prompt to rewards and the judge, never into it."""

    id: str
    """Stable id (keys corruption hashes, zero-shot lookups and eval records)."""
    question: str
    """The problem statement, without any format instructions."""
    reference: str
    """Canonical reference answer (already parsed: `72`, `\\frac{3}{4}`), never shown to the policy."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Source, level, subject, n_steps, operators... (bias selectors read this)."""
    solution: str | None = None
    """A worked solution in the strict completion format (warm-start data), when the provider has one."""

    def to_row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TrainingSample:
        return cls(
            id=str(row["id"]),
            question=row["question"],
            reference=str(row["reference"]),
            metadata=dict(row.get("metadata") or {}),
            solution=row.get("solution"),
        )
