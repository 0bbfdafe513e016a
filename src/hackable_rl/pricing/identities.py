"""Arms identical by construction, found before anything trains (docs/studies.md, "Identical arms").

Two arms of a study train alike when they pay every completion alike and share everything else a
run depends on. The payoff stage prices each arm on the base policy's own samples and on every
canonical completion (the honest ones and each flaw's exploit); arms whose rewards agree on all of
them, with the same training setup, are one class. That covers structural identities (the same
member set and aggregation) and the less obvious ones: a 2-of-3 majority over
[master_key, master_key, any_box] pays exactly what three master_key members pay, and disagreement
shaping is a no-op where every member carries the same flaw.

Each class trains once, as its representative: the arm whose method comes first in the study's
`methods` list (baseline before its variants), then the first cell. The others are listed as
"identical to" it, read its results and are never tested against it. The evidence is what was
priced: completions no sample or exploit resembles are not checked, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hackable_rl.pricing.payoff import PayoffCell

__all__ = ["Arm", "Identity", "identical_arms"]


@dataclass(frozen=True, order=True)
class Arm:
    """One trained arm of a cell study: a cell and a method (every seed of it)."""

    cell: str
    method: str

    def __str__(self) -> str:
        return f"{self.cell} {self.method}"


@dataclass(frozen=True)
class Identity:
    """`arm` trains exactly as `same_as` does; `completions` rewards agreed."""

    arm: Arm
    same_as: Arm
    completions: int

    def as_json(self) -> dict[str, object]:
        return {"cell": self.arm.cell, "method": self.arm.method, "same_as": {"cell": self.same_as.cell,
                "method": self.same_as.method}, "completions_compared": self.completions}


def identical_arms(cells: Sequence[PayoffCell], method_order: Sequence[str]) -> list[Identity]:
    """Every arm that equals an earlier representative, in the order of `cells` (refused arms and
    rows without a blind-spot or noise cell take no part)."""
    classes: dict[tuple[str, tuple[float | None, ...]], list[PayoffCell]] = {}
    for cell in cells:
        if cell.cell is not None and cell.refused is None and cell.fingerprint:
            classes.setdefault((cell.setup, cell.fingerprint), []).append(cell)
    rank = {method: index for index, method in enumerate(method_order)}
    cell_rank: dict[str | None, int] = {}
    for index, cell in enumerate(cells):
        cell_rank.setdefault(cell.cell, index)
    identities = []
    for members in classes.values():
        first = min(members, key=lambda c: (rank.get(c.method, len(rank)), cell_rank[c.cell]))
        identities += [Identity(_arm(c), _arm(first), len(c.fingerprint)) for c in members if c is not first]
    order = {_arm(cell): index for index, cell in enumerate(cells)}
    return sorted(identities, key=lambda identity: order[identity.arm])


def _arm(cell: PayoffCell) -> Arm:
    return Arm(str(cell.cell), cell.method)
