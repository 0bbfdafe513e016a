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
`method=<registered method>`) name a method with other settings, e.g. baseline under majority.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config.loading import parse_override, read_yaml
from hackable_rl.core.errors import UserError
from hackable_rl.verifiers.patterns import pattern_flaws

__all__ = ["Cell", "NoiseCell", "CellRoles", "read_cell", "noise_cells", "cell_overrides", "variant_method", "study_cells", "cell_roles", "read_study_file"]


@dataclass(frozen=True)
class Cell:
    """One blind-spot cell: its name, each member's checker, and the flaw the study measures."""

    name: str
    checkers: tuple[str, ...]
    exploited_flaw: str | None
    rates: dict[str, tuple[float, float]]
    """(rho0, rho1) per flawed checker, as the study file declares them (corrected reads them)."""
    patterns: tuple[str, ...] = ()
    """The natural flaws the study names in any cell (`verifiers/patterns.py`): each one's pattern
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


def read_study_file(study_file: Path) -> Any:
    """The study file's YAML (the params loader: encoding, duplicate keys and alias bombs refused);
    a UserError when it does not exist."""
    if not study_file.exists():
        raise UserError(f"{study_file}: no such study file (pass --study PATH)")
    return read_yaml(study_file)


def _study(study_file: Path) -> dict[str, Any]:
    data = read_study_file(study_file)
    if not isinstance(data, dict):
        raise UserError(f"{study_file}: expected a mapping (the study grid)")
    return data


def study_cells(study_file: Path) -> list[str]:
    """The cell names a study file declares, in order (empty for a rate grid)."""
    cells = _study(study_file).get("cells") or {}
    if not isinstance(cells, dict):
        raise UserError(f"{study_file}: cells must map a cell name to a list of member checkers")
    return list(cells)


def read_cell(study_file: Path, name: str) -> Cell | NoiseCell:
    """The cell `name` of the study file; a UserError naming the file and key when it is malformed."""
    data = _study(study_file)
    cells = dict(data.get("cells") or {}) | _reference_cell(data)
    if name not in cells:
        raise UserError(f"{study_file}: --cell {name!r}: no such cell (cells: {', '.join(cells) or 'none'})")
    checkers = cells[name]
    if isinstance(checkers, dict):
        return _noise_cell(study_file, name, checkers)
    if not isinstance(checkers, list) or not checkers or not all(isinstance(c, str) for c in checkers):
        raise UserError(f"{study_file}: cells.{name} must be a non-empty list of checker names "
                        "or the members' noise, {fpr: 0.3, fnr: 0.1}")
    return Cell(name, tuple(checkers), data.get("exploited_flaw"), _rates(study_file, data.get("flaw_rates") or {}),
                _natural_flaws(data))


def _natural_flaws(data: dict[str, Any]) -> tuple[str, ...]:
    """Every natural flaw the study names (its exploited flaw, then its cells' checkers, in order)."""
    named = [data.get("exploited_flaw")] + [checker for checkers in (data.get("cells") or {}).values()
                                            if isinstance(checkers, list) for checker in checkers]
    return tuple(pattern_flaws([name for name in named if isinstance(name, str)]))


def _noise_cell(study_file: Path, name: str, rates: dict[str, Any]) -> NoiseCell:
    values = {key: rates.get(key) for key in ("fpr", "fnr")}
    if set(rates) != {"fpr", "fnr"} or not all(isinstance(v, int | float) and 0 <= v <= 1 for v in values.values()):
        raise UserError(f"{study_file}: cells.{name} must be {{fpr: P, fnr: P}} with each P in [0, 1], got {rates}")
    return NoiseCell(name, float(values["fpr"]), float(values["fnr"]))


def noise_cells(study_file: Path) -> list[NoiseCell]:
    """The J sweep's cells (noise cells), the reference first when it is one; empty in a blind-spot study."""
    data = _study(study_file)
    names = [*_reference_cell(data), *(data.get("cells") or {})]
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
    """The natural flaws among them (`verifiers/patterns.py`): each one's pattern share is reported."""
    family: tuple[str, ...] = ()
    """The study file's `family`: the outcome names Holm's correction runs over (empty: every declared outcome)."""
    partial: tuple[str, ...] = ()
    """The cells in which some member lacks the exploited flaw (where disagreement can see it)."""

    @property
    def natural(self) -> bool:
        """The exploited flaw is a natural one: the study measures an error the policy makes by itself."""
        return bool(self.checkers) and self.checkers[0] in self.patterns


def study_family(study_file: Path) -> tuple[str, ...]:
    """The study file's `family`: the outcome names Holm's correction runs over (empty: undeclared)."""
    family = _study(study_file).get("family") or []
    if not isinstance(family, list) or not all(isinstance(name, str) for name in family):
        raise UserError(f"{study_file}: family must be a list of outcome names (those Holm's correction runs over)")
    return tuple(family)


def cell_roles(study_file: Path) -> CellRoles:
    """The study file's cells, its reference cell and its positive control (read, never guessed from names)."""
    names = study_cells(study_file)
    cells = [cell for cell in (read_cell(study_file, name) for name in names) if isinstance(cell, Cell)]  # a noise cell has no flaw
    shared_by_all = [cell.name for cell in cells if cell.sharing == len(cell.checkers)]
    data = _study(study_file)
    reference = data.get("reference")
    flaw = data.get("exploited_flaw")
    checkers = [*([flaw] if flaw else []), *(c for cell in cells for c in cell.checkers)]
    family = study_family(study_file)
    return CellRoles(tuple(names), reference.get("cell") if isinstance(reference, dict) else None,
                     shared_by_all[0] if shared_by_all else None, tuple(data.get("methods") or ()),
                     tuple(dict.fromkeys(checkers)), _natural_flaws(data), tuple(family),
                     tuple(cell.name for cell in cells if 0 < cell.sharing < len(cell.checkers)))


def _reference_cell(data: dict[str, Any]) -> dict[str, Any]:
    """The clean reference as a cell (`reference: {cell: clean, members: [clean, ...]}`, or in a J sweep
    `{cell: clean, fpr: 0, fnr: 0}`), if declared."""
    reference = data.get("reference") or {}
    if not isinstance(reference, dict) or "cell" not in reference:
        return {}
    if "members" in reference:
        return {reference["cell"]: reference["members"]}
    return {reference["cell"]: {key: value for key, value in reference.items() if key != "cell"}}


def _rates(study_file: Path, table: Any) -> dict[str, tuple[float, float]]:
    if not isinstance(table, dict):
        raise UserError(f"{study_file}: flaw_rates must map a checker to [rho0, rho1]")
    rates = {}
    for checker, pair in table.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, int | float) for x in pair)):
            raise UserError(f"{study_file}: flaw_rates.{checker} must be [rho0, rho1], e.g. [0.1, 0.0]")
        rates[checker] = (float(pair[0]), float(pair[1]))
    return rates


def cell_overrides(cell: Cell | NoiseCell) -> list[str]:
    """`--set` overrides that give every member its cell's checker (no channel: the flaws are the
    checkers), or, for a noise cell, the asymmetric channel at the cell's fpr and fnr (the members as
    the params file declares them)."""
    if isinstance(cell, NoiseCell):
        return ["corruption.channel=asymmetric", f"corruption.rate={cell.rate!r}",
                f"corruption.kwargs={json.dumps({'fpr': cell.fpr, 'fnr': cell.fnr})}"]
    return [f"verifier.members={json.dumps(cell.members())}", "corruption.channel=none", "corruption.rate=0"]


def variant_method(overrides: list[str]) -> str | None:
    """The registered method a method variant's overrides name (`method=baseline`), else None."""
    for text in overrides:
        key, value = parse_override(text)
        if key == "method":
            return str(value)
    return None
