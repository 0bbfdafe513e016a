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

`affine_arms` finds the arms that differ from another only by a map of the reward that GRPO's
update cannot see, on the same evidence. TRL's advantage is a reward minus its prompt group's mean
(divided by the group's standard deviation under `trainer.scale_rewards: group`, by the batch's
under `batch`), so:
- `group`: a positive scale and a shift per prompt group give the same advantages;
- `none`: a shift per group gives the same advantages, and one positive scale for every group
  multiplies them, which Adam's normalised step undoes (to its epsilon, and where gradient
  clipping treats both alike) unless a KL term (`trainer.beta` > 0) is added unscaled;
- `batch`: one positive scale and one shift for the whole batch.
Such an arm is still trained (its results show what rounding leaves of the identity), but it is
never tested against its twin: the reports keep it out of every Holm family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hackable_rl.payoff.table import PayoffCell

__all__ = ["Arm", "Identity", "affine_arms", "affine_map", "identical_arms"]

RELATIVE_TOLERANCE = 1e-9
"""Two rewards agree when they differ by less than this share of the larger reward spread."""


@dataclass(frozen=True, order=True)
class Arm:
    """One trained arm of a cell study: a cell and a method (every seed of it)."""

    cell: str
    method: str

    def __str__(self) -> str:
        return f"{self.cell} {self.method}"


@dataclass(frozen=True)
class Identity:
    """`arm` trains exactly as `same_as` does (`relation` "identical"), or as GRPO and Adam make it
    (`relation` names the map: `affine_arms`); `completions` rewards compared."""

    arm: Arm
    same_as: Arm
    completions: int
    relation: str = "identical"

    def as_json(self) -> dict[str, object]:
        document = {"cell": self.arm.cell, "method": self.arm.method, "same_as": {"cell": self.same_as.cell,
                    "method": self.same_as.method}, "completions_compared": self.completions}
        return document if self.relation == "identical" else document | {"relation": self.relation}


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


def affine_arms(cells: Sequence[PayoffCell], method_order: Sequence[str]) -> list[Identity]:
    """Every arm whose priced rewards are a map GRPO cannot see (module docstring) of an earlier
    representative's with the same training setup, and not identical to it; `completions` compared."""
    rank = {method: index for index, method in enumerate(method_order)}
    priced = [c for c in cells if c.cell is not None and c.refused is None and c.fingerprint and c.groups]
    ordered = sorted(priced, key=lambda c: rank.get(c.method, len(rank)))
    found = []
    for index, cell in enumerate(ordered):
        maps = ((other, affine_map(other.fingerprint, cell.fingerprint, cell.groups, cell.advantage))
                for other in ordered[:index] if other.setup == cell.setup and other.cell == cell.cell
                and other.fingerprint != cell.fingerprint)
        twin, relation = next(((other, found_map) for other, found_map in maps if found_map), (None, None))
        if twin is not None and relation is not None:
            found.append(Identity(_arm(cell), _arm(twin), len(cell.fingerprint), relation))
    order = {_arm(cell): index for index, cell in enumerate(cells)}
    return sorted(found, key=lambda identity: order[identity.arm])


def affine_map(base: Sequence[float | None], other: Sequence[float | None], groups: Sequence[str],
               advantage: tuple[str, float]) -> str | None:
    """How `other` follows from `base` by a map that leaves GRPO's advantages (or Adam's step)
    unchanged under `advantage` = (scale_rewards, beta), or None. Unpriced entries (None) must match."""
    if len(base) != len(other) or len(groups) != len(base):
        return None
    if any((a is None) != (b is None) for a, b in zip(base, other, strict=True)):
        return None
    scale_rewards, beta = advantage
    priced = [index for index, value in enumerate(base) if value is not None]
    kept_groups = [groups[i] for i in priced]
    by_group = scale_rewards != "batch"
    x = _centred([base[i] for i in priced], kept_groups, by_group)
    y = _centred([other[i] for i in priced], kept_groups, by_group)
    tolerance = RELATIVE_TOLERANCE * max(1.0, *(abs(v) for v in x + y))
    if scale_rewards == "group":
        return "positive scale and shift per prompt group" if all(
            _positive_multiple(xs, ys, tolerance) is not None for xs, ys in _split(x, y, kept_groups)) else None
    scale = _positive_multiple(x, y, tolerance)
    if scale is None or (beta > 0 and abs(scale - 1.0) > tolerance):
        return None
    shift = "a shift per prompt group" if by_group else "one shift"
    return shift if abs(scale - 1.0) <= tolerance else f"one positive scale ({scale:.6g}) and {shift}"


def _centred(values: list[float], groups: list[str], by_group: bool) -> list[float]:
    keys = groups if by_group else [""] * len(values)
    means = {key: sum(v for v, k in zip(values, keys, strict=True) if k == key) / keys.count(key) for key in set(keys)}
    return [value - means[key] for value, key in zip(values, keys, strict=True)]


def _split(x: list[float], y: list[float], groups: list[str]) -> list[tuple[list[float], list[float]]]:
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    return [([x[i] for i in rows], [y[i] for i in rows]) for rows in members.values()]


def _positive_multiple(x: list[float], y: list[float], tolerance: float) -> float | None:
    """a > 0 with y = a * x entry by entry (both all zero: 1.0), or None."""
    largest = max(range(len(x)), key=lambda i: abs(x[i]), default=None)
    if largest is None or abs(x[largest]) <= tolerance:
        return 1.0 if all(abs(v) <= tolerance for v in y) else None
    scale = y[largest] / x[largest]
    if scale <= 0 or any(abs(b - scale * a) > tolerance * max(1.0, scale) for a, b in zip(x, y, strict=True)):
        return None
    return scale
