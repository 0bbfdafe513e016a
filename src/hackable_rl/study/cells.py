"""Blind-spot cells of a study file: which flaw each training-verifier member carries, systematically.

A member whose checker is itself flawed fires on every input where the flaw's pattern applies: the
same input fools the same verifier every time, as real blind spots do. A cell lists one checker per
member; how many members share the exploited flaw (k of M) is what a cell varies, and no member is
ever an oracle (each holds some flaw). The study file reads:

    exploited_flaw: master_key          # the flaw whose exploit the study measures
    flaw_rates: {master_key: [0.1, 0.0], any_box: [0.03, 0.0]}   # (rho0, rho1) per flaw: corrected's rates
    cells:
      k1: [master_key, any_box, any_box]
      k3: [master_key, master_key, master_key]
    reference: {cell: clean, members: [clean, clean, clean]}   # the clean reference, a cell of its own

A cell may instead give its members' random noise directly, `{fpr: 0.3, fnr: 0.1}` (a `NoiseCell`:
the J sweep): every member keeps its checker and is flipped by the asymmetric channel at those
probabilities, so the cell's Youden's J is 1 - fpr - fnr.

`cell_overrides` turns a cell into `--set` overrides (the members, with their rates), so every method
of a cell trains against the same members. Method variants (`method_overrides.<label>` holding
`method=<registered method>`) name a method with other settings, e.g. baseline under majority;
`study_condition` gives one condition all of it: the cell's overrides, then the method's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config.loading import parse_override
from hackable_rl.config.study import NoiseRates, StudyFile, load_study
from hackable_rl.core.errors import UserError
from hackable_rl.reward.patterns import pattern_flaws
from hackable_rl.study.records import BASE

__all__ = ["Cell", "NoiseCell", "CellRoles", "read_cell", "noise_cells", "cell_overrides", "noisy_members", "variant_method", "study_cells", "cell_roles"]


@dataclass(frozen=True)
class Cell:
    """One blind-spot cell: its name, each member's checker, and the flaw the study measures."""

    name: str
    checkers: tuple[str, ...]
    exploited_flaw: str | None
    rates: dict[str, tuple[float, float]]
    """(rho0, rho1) per flawed checker, as the study file declares them (corrected reads them)."""
    patterns: tuple[str, ...] = ()
    """The natural flaws the study names in any cell (`reward/patterns.py`): each one's pattern
    share is measured in every condition, whichever flaws this cell's members hold."""

    @property
    def sharing(self) -> int:
        """k: how many members carry the exploited flaw."""
        return sum(checker == self.exploited_flaw for checker in self.checkers)

    def members(self) -> list[dict[str, Any]]:
        """`verifier.members`: m0.. in order, uncorrupted (the flaw is the checker), with their rates."""
        members = []
        for index, checker in enumerate(self.checkers):
            member: dict[str, Any] = {"name": f"m{index}", "checker": checker, "corrupted": False}
            if checker in self.rates:
                member["noise_rates"] = list(self.rates[checker])
            members.append(member)
        return members


@dataclass(frozen=True)
class NoiseCell:
    """One cell of the J sweep: every corrupted member pays a wrong answer with probability `fpr` and
    denies a right one with `fnr`, on its own hash stream (random noise, not a blind spot)."""

    name: str
    fpr: float
    fnr: float
    members: int | None = None
    """How many members the cell gives the training verifier, each the clean checker flipped on its own
    stream (a noisy ensemble); None: the params file's members."""
    exploited_flaw: None = None
    """No flaw: random noise has no exploit (the report has no exploit share to read)."""

    @property
    def youden(self) -> float:
        """Youden's J = TPR - FPR = 1 - fnr - fpr (rounded: 1 - 0.3 - 0.1 reads 0.6, not 0.6000000000000001)."""
        return round(1.0 - self.fpr - self.fnr, 12)

    @property
    def rate(self) -> float:
        """The flip rate with the same J, (fpr + fnr) / 2: `corruption.rate` (0 only for a clean cell)."""
        return round((self.fpr + self.fnr) / 2, 12)


def study_cells(study_file: Path) -> list[str]:
    """The cell names a study file declares, in order (empty for a rate grid)."""
    return list(load_study(study_file).cells)


def read_cell(study_file: Path, name: str) -> Cell | NoiseCell:
    """The cell `name` of the study file (its reference cell included); a UserError naming the file
    and the cells it has when there is no such cell."""
    study = load_study(study_file)
    cells = study.grid_cells()
    if name not in cells:
        raise UserError(f"{study_file}: --cell {name!r}: no such cell (cells: {', '.join(cells) or 'none'})")
    entry = cells[name]
    if isinstance(entry, NoiseRates):
        return NoiseCell(name, float(entry.fpr), float(entry.fnr), entry.members)
    rates = {flaw: (float(rho0), float(rho1)) for flaw, (rho0, rho1) in study.flaw_rates.items()}
    return Cell(name, tuple(entry), study.exploited_flaw, rates, _natural_flaws(study))


def _natural_flaws(study: StudyFile) -> tuple[str, ...]:
    """Every natural flaw the study names (its exploited flaw, then its cells' checkers, in order)."""
    named = [study.exploited_flaw] + [checker for checkers in study.cells.values()
                                      if isinstance(checkers, list) for checker in checkers]
    return tuple(pattern_flaws([name for name in named if name is not None]))


def noise_cells(study_file: Path) -> list[NoiseCell]:
    """The J sweep's cells (noise cells), the reference first when it is one; empty in a blind-spot study."""
    study = load_study(study_file)
    names = [*([study.reference.cell] if study.reference else []), *study.cells]
    cells = [read_cell(study_file, name) for name in names]
    return [cell for cell in cells if isinstance(cell, NoiseCell)]


@dataclass(frozen=True)
class CellRoles:
    """What each cell of a study file is for, as its report reads it."""

    trained: tuple[str, ...]
    """The blind-spot cells, in the study file's order."""
    reference: str | None
    """The clean reference's cell (`reference.cell`), if declared."""
    positive_control: str | None
    """The first cell in which every member carries the exploited flaw, if any."""
    methods: tuple[str, ...] = ()
    """The study file's `methods` (and method variants), in its order."""
    checkers: tuple[str, ...] = ()
    """The flawed checkers of its cells: the exploited flaw first, then the others in order."""
    patterns: tuple[str, ...] = ()
    """The natural flaws among them (`reward/patterns.py`): each one's pattern share is reported."""
    family: tuple[str, ...] = ()
    """The study file's `family`: the outcome names Holm's correction runs over (empty: every declared outcome)."""
    partial: tuple[str, ...] = ()
    """The cells in which some member lacks the exploited flaw (where disagreement can see it)."""

    @property
    def natural(self) -> bool:
        """The exploited flaw is a natural one: the study measures an error the policy makes by itself."""
        return bool(self.checkers) and self.checkers[0] in self.patterns


def cell_roles(study_file: Path) -> CellRoles:
    """The study file's cells, its reference cell and its positive control (read, never guessed from names)."""
    study = load_study(study_file)
    names = list(study.cells)
    cells = [cell for cell in (read_cell(study_file, name) for name in names) if isinstance(cell, Cell)]  # a noise cell has no flaw
    shared_by_all = [cell.name for cell in cells if cell.sharing == len(cell.checkers)]
    flaw = study.exploited_flaw
    checkers = [*([flaw] if flaw else []), *(c for cell in cells for c in cell.checkers)]
    return CellRoles(tuple(names), study.reference.cell if study.reference else None,
                     shared_by_all[0] if shared_by_all else None, tuple(study.methods),
                     tuple(dict.fromkeys(checkers)), _natural_flaws(study), tuple(study.family),
                     tuple(cell.name for cell in cells if 0 < cell.sharing < len(cell.checkers)))


def cell_overrides(cell: Cell | NoiseCell) -> list[str]:
    """`--set` overrides that give every member its cell's checker (no channel: the flaws are the
    checkers), or, for a noise cell, the asymmetric channel at the cell's fpr and fnr (the members as
    the params file declares them)."""
    if isinstance(cell, NoiseCell):
        ensemble = [] if cell.members is None else [f"verifier.members={json.dumps(noisy_members(cell.members))}"]
        return [*ensemble, "corruption.channel=asymmetric", f"corruption.rate={cell.rate!r}",
                f"corruption.kwargs={json.dumps({'fpr': cell.fpr, 'fnr': cell.fnr})}"]
    return [f"verifier.members={json.dumps(cell.members())}", "corruption.channel=none", "corruption.rate=0"]


def noisy_members(count: int) -> list[dict[str, Any]]:
    """`verifier.members` of a noisy ensemble: m0.. each the clean checker, each corrupted (on its own
    stream: the channel hashes the member's name with the completion)."""
    return [{"name": f"m{index}", "checker": "clean", "corrupted": True} for index in range(count)]


def variant_method(overrides: list[str]) -> str | None:
    """The registered method a method variant's overrides name (`method=baseline`), else None."""
    for text in overrides:
        key, value = parse_override(text)
        if key == "method":
            return str(value)
    return None


def method_overrides(study_file: Path, method: str) -> list[str]:
    """`--set` overrides that a study file gives one method (e.g. robust's clean + flawed ensemble).

    The file's `method_overrides` maps a method to a list of `key=value` strings; a method it does
    not list gets none.
    """
    return list(load_study(study_file).method_overrides.get(method, []))


def study_condition(
    study_file: Path, method: str, cell_name: str | None
) -> tuple[list[str], Cell | NoiseCell | None, bool]:
    """What a study file gives one condition: its `--set` overrides (the cell's members first, then
    the method's own), the cell, and whether `method` is a variant (its overrides set `method`)."""
    overrides = method_overrides(study_file, method)
    cell = read_cell(study_file, cell_name) if cell_name is not None else None
    variant = variant_method(overrides) is not None
    # the method first, so that its own settings (method_kwargs) resolve against it
    method_set = [] if variant or method == BASE else [f"method={method}"]
    return [*(cell_overrides(cell) if cell else []), *method_set, *overrides], cell, variant
