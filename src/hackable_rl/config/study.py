"""The study file (`study.yaml`), typed: what a study declares before it runs and the grid it runs
(docs/studies.md, "Declaring a study").

Every module that reads a study file takes the parsed `StudyFile` from `load_study`; none indexes
the YAML itself (tests/test_study_schema.py checks it). A key the schema does not know is refused
with the nearest name, so a typo (`famliy:`) is an error, not a declaration silently missing. The
file also serves DVC as `vars` beside params.yaml (its `dvc.yaml` matrices read `seeds`, `cells`
and `<method>_cells`), which is why the report kind is `report_kind`, not `report`.

`load_study` checks the grid and its cross-references; `load_study_declaration` also requires the
declarations a study must make before it runs (its replicates, primary outcomes and Holm family):
`hackable-rl validate --study FILE` and every study's payoff stage refuse a study without them.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    ValidationError,
    field_validator,
    model_validator,
)

from hackable_rl.config.loading import describe_problem, read_yaml
from hackable_rl.core.errors import UserError

__all__ = ["MIN_PRIMARY_REPLICATES", "REPORT_KINDS", "STUDY_FILE", "AlarmSplit", "Deviation", "HackingDefinition", "NoiseRates",
           "ReferenceCell", "StudyDeclaration", "StudyFile", "load_study", "load_study_declaration", "study_file_beside"]

STUDY_FILE = "study.yaml"
"""The study file's name, beside the study's results folder (its dvc.yaml reads it as `vars`)."""


def study_file_beside(results_dir: str | Path) -> Path:
    """The study file of a study's results folder: `study.yaml` beside it (the one place this path is built)."""
    return Path(results_dir).resolve().parent / STUDY_FILE


MIN_PRIMARY_REPLICATES = 5
"""Primary outcomes need at least this many replicates (whole pipeline seeds, warm start included)."""

REPORT_KINDS = ("rate_grid", "j_sweep", "blind_spots", "real_model")
"""The reports a study can declare (`report_kind`): a rate grid's, the J sweep's, a blind-spot study's
(planted or natural flaws) and the real-model study's."""

_METHOD_CELLS = "_cells"


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoiseRates(_Part):
    """A J-sweep cell: every corrupted member pays a wrong answer with probability `fpr` and denies a
    right one with `fnr`."""

    fpr: float = Field(ge=0, le=1)
    fnr: float = Field(ge=0, le=1)
    members: int | None = Field(default=None, ge=1)
    """How many training-verifier members the cell has, each the clean checker corrupted at these rates on
    its own stream (a noisy ensemble); null: the members the params file declares."""


class ReferenceCell(_Part):
    """The clean reference, a cell of its own: its members (a blind-spot study) or its noise (a J sweep)."""

    cell: str
    """Its name (results/reference/<method>-<cell>-s<seed>)."""
    members: list[str] | None = None
    """One checker per member (blind-spot studies)."""
    fpr: float | None = Field(default=None, ge=0, le=1)
    """The J sweep's reference noise (0 for a clean one)."""
    fnr: float | None = Field(default=None, ge=0, le=1)

    def as_cell(self) -> list[str] | NoiseRates:
        """Its grid entry: the members, or the noise."""
        if self.members is not None:
            return list(self.members)
        return NoiseRates(fpr=self.fpr or 0.0, fnr=self.fnr or 0.0)


class HackingDefinition(_Part):
    """Which runs of a study hacked, by the judge (declared before the alarm benchmark runs)."""

    rule: Literal["live_judge", "judge_onset", "train_rise"] = "live_judge"
    """live_judge: the judge's live monitor fires in the run (the onset the alarm is scored against,
    so a hacking run is one it can be on time for); judge_onset: the run's hindsight judge onset exists
    (onset.json); train_rise: condition.json's `train/<metric>/last` minus `train/<metric>/first` is at
    least `min_rise`."""
    metric: str = "hacking_gap"
    """train_rise: the training metric whose rise over training marks hacking."""
    min_rise: float = 0.05
    """train_rise: the smallest rise that counts as hacking."""


class AlarmSplit(_Part):
    """Which replicates choose the alarm's thresholds; the others are held out and reported once."""

    tune_seeds: tuple[NonNegativeInt, ...] = (0, 1)
    """The seeds of the tune split (every other seed is held out)."""


class Deviation(_Part):
    """A change to a study's declared analysis made after its data were seen: recorded with its date and
    reason, its verdicts shown beside the declared ones, never in their place."""

    date: datetime.date
    """When the change was made (YYYY-MM-DD)."""
    change: Literal["affine_twins_out_of_holm"]
    """What changed. `affine_twins_out_of_holm`: comparisons of an arm with its affine twin (its reward a
    positive affine map of the other's) leave the Holm family; the declared family keeps them."""
    reason: str = Field(min_length=1)
    """Why, in words."""

    @field_validator("reason")
    @classmethod
    def _said(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("say why the analysis changed")
        return reason


class StudyFile(_Part):
    """A study file. The grid is one of: `cells` (blind spots, member lists; or J-sweep noise) or
    `rates` x `flaws` (a rate grid); `methods` run in every cell unless `<method>_cells` lists theirs."""

    report_kind: Literal["rate_grid", "j_sweep", "blind_spots", "real_model"] | None = None
    """Which report `hackable-rl report --study` builds (REPORT_KINDS); null: a rate grid's."""
    exploited_flaw: str | None = None
    """The flaw whose exploit (or, for a natural flaw, whose pattern) the study measures."""
    cells: dict[str, list[str] | NoiseRates] = {}
    """Cell name -> one checker per training-verifier member, or the members' noise {fpr, fnr}."""
    reference: ReferenceCell | None = None
    """The clean reference cell."""
    reference_method: str = "baseline"
    """The method the clean reference trains (dvc.yaml's reference stage runs `--method ${reference_method}`)."""
    rates: list[float] = []
    """A rate grid's corruption rates."""
    flaws: list[str | None] = []
    """A rate grid's flaws (null: the configured channel alone)."""
    methods: list[str] = []
    """The methods run in each cell (`base`: the warm start, no RL), in report order."""
    method_cells: dict[str, list[str]] = {}
    """`<method>_cells` keys of the file: the cells a method runs in, where not all of them."""
    method_overrides: dict[str, list[str]] = {}
    """Method label -> `--set` overrides (`method=<registered method>` makes the label a variant)."""
    flaw_rates: dict[str, tuple[float, float]] = {}
    """Flaw -> (rho0, rho1) measured on base samples: what `corrected` is told."""
    random_control: str | None = None
    """The J sweep's random-reward cell (J = 0)."""
    equal_j: list[tuple[str, str]] = []
    """J-sweep pairs of cells with one J (equal-J, equal-gain outcome)."""
    seeds: list[int] = []
    """The replicates: each a whole pipeline seed, its own warm start included."""
    primary_outcomes: list[str] = []
    """The outcomes the study is run to decide, named as in its metrics/outcomes.json."""
    family: list[str] = []
    """The primary outcomes Holm's correction adjusts together (each a name in `primary_outcomes`);
    every comparison under one of these names is in the family, the others are reported unadjusted."""
    primary_replicates: int = Field(default=MIN_PRIMARY_REPLICATES, ge=2)
    """How many replicates the primary outcomes are declared with: `seeds` must hold at least as many,
    and fewer than MIN_PRIMARY_REPLICATES only with `small_n_reason`."""
    small_n_reason: str | None = None
    """Why the study declares fewer replicates than the spec asks (its report labels the small n)."""
    budget_hours: float | None = Field(default=None, gt=0)
    """The wall time the study must fit on 2 CPU cores; `validate --study` refuses settings whose
    estimate (`study.budget`) exceeds it. null: no budget declared."""
    equivalence_margin: float | None = Field(default=None, gt=0, lt=1)
    """The margin inside which a difference is called equivalent (TOST); null: none is."""
    hacking_definition: HackingDefinition | None = None
    """Which runs hacked, for the alarm benchmark."""
    alarm_split: AlarmSplit = AlarmSplit()
    """The alarm benchmark's tune and held-out replicates."""
    deviations: list[Deviation] = []
    """Changes to the declared analysis made after the data (each dated, with its reason): the report
    leads with the declared analysis and shows each deviation's verdicts beside it, labelled."""

    @model_validator(mode="before")
    @classmethod
    def _gather_method_cells(cls, data: Any) -> Any:
        """`<method>_cells: [...]` (a DVC matrix's list) into `method_cells`."""
        if not isinstance(data, dict):
            raise ValueError("expected a mapping (the study's grid and declarations)")
        methods = data.get("methods") if isinstance(data.get("methods"), list) else []
        own = {key: value for key, value in data.items()
               if key.endswith(_METHOD_CELLS) and key.removesuffix(_METHOD_CELLS) in methods}
        if not own:
            return data
        rest = {key: value for key, value in data.items() if key not in own}
        return rest | {"method_cells": {key.removesuffix(_METHOD_CELLS): value for key, value in own.items()}}

    @field_validator("cells", mode="before")
    @classmethod
    def _cells_are_members_or_noise(cls, cells: Any) -> Any:
        if not isinstance(cells, dict):
            raise ValueError("must map a cell name to a list of member checkers or their noise {fpr, fnr}")
        for name, entry in cells.items():
            if isinstance(entry, dict):
                values = [entry.get(key) for key in ("fpr", "fnr")]
                members = entry.get("members", 1)
                if not {"fpr", "fnr"} <= set(entry) <= {"fpr", "fnr", "members"} or not all(
                        _is_probability(value) for value in values):
                    raise ValueError(f"cells.{name} must be {{fpr: P, fnr: P}} with each P in [0, 1] (and optionally "
                                     f"members: N), got {entry}")
                if isinstance(members, bool) or not isinstance(members, int) or members < 1:
                    raise ValueError(f"cells.{name}.members must be a whole number of members, 1 or more, got {members!r}")
            elif not (isinstance(entry, list) and entry and all(isinstance(c, str) for c in entry)):
                raise ValueError(f"cells.{name} must be a non-empty list of checker names or the members' noise, "
                                 "{fpr: 0.3, fnr: 0.1}")
        return cells

    @model_validator(mode="after")
    def _names_agree(self) -> StudyFile:
        cells = self.grid_cells()
        for method, listed in self.method_cells.items():
            unknown = [name for name in listed if name not in cells]
            if unknown:
                raise ValueError(f"{method}{_METHOD_CELLS}: {', '.join(unknown)} not among cells")
        if self.family:
            unknown = [name for name in self.family if name not in self.primary_outcomes]
            if unknown:
                raise ValueError(f"family: {', '.join(unknown)} not among primary_outcomes")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: a seed is listed twice (each replicate once)")
        return self

    def grid_cells(self) -> dict[str, list[str] | NoiseRates]:
        """The declared cells and the reference cell (last), by name."""
        reference = {self.reference.cell: self.reference.as_cell()} if self.reference else {}
        return dict(self.cells) | reference

    def trained_arms(self) -> int:
        """How many arms train per replicate: each trained method in each cell it runs in (its
        `<method>_cells`, else every cell), plus the clean reference."""
        cells = list(self.cells)
        arms = sum(1 for method in self.trained_methods() for name in self.method_cells.get(method, cells))
        return arms + (1 if self.reference is not None else 0)

    def trained_methods(self) -> list[str]:
        """`methods` without `base` (which trains nothing)."""
        return [method for method in self.methods if method != "base"]


class StudyDeclaration(StudyFile):
    """A study file that makes the declarations a study must make before it runs."""

    @model_validator(mode="after")
    def _declared(self) -> StudyDeclaration:
        for name in ("seeds", "primary_outcomes", "family"):
            if not getattr(self, name):
                raise ValueError(f"{name}: required key is missing")
        if self.primary_replicates < MIN_PRIMARY_REPLICATES and not (self.small_n_reason or "").strip():
            raise ValueError(f"primary_replicates: {self.primary_replicates} is below the spec's "
                             f"{MIN_PRIMARY_REPLICATES}; declare why in small_n_reason, or run {MIN_PRIMARY_REPLICATES}")
        if len(self.seeds) < self.primary_replicates:
            raise ValueError(f"seeds: {len(self.seeds)} replicates, but the primary outcomes are declared with "
                             f"{self.primary_replicates} (primary_replicates)")
        return self


def load_study(study_file: Path) -> StudyFile:
    """The study file, parsed; a UserError with one line per problem, naming the file (a missing file
    names the --study option)."""
    path = _readable(Path(study_file))
    return _parsed(StudyFile, str(path), str(path.resolve()), _digest(path))


def load_study_declaration(study_file: Path) -> StudyDeclaration:
    """The study file with its declarations required (`StudyDeclaration`)."""
    path = _readable(Path(study_file))
    return _parsed(StudyDeclaration, str(path), str(path.resolve()), _digest(path))


def _readable(path: Path) -> Path:
    """The study file, or the one-line reason it cannot be read (missing; a folder, FIFO or device:
    the YAML reader's own words)."""
    if not path.exists():
        raise UserError(f"{path}: no such study file (pass --study PATH)")
    if not path.is_file():
        read_yaml(path)  # raises the reader's one line for what the path is
    return path


@lru_cache(maxsize=32)
def _parsed(schema: type[StudyFile], shown: str, resolved: str, digest: str) -> StudyFile:
    """One parse per file content (a report reads its study file from a dozen functions); errors name
    the file as it was given."""
    del digest  # part of the cache key only: an edited file is parsed again
    try:
        return schema.model_validate(read_yaml(Path(resolved)))
    except ValidationError as error:
        raise UserError(*(f"{shown}: {_problem(item)}" for item in error.errors())) from None


def _digest(path: Path) -> str:
    """The file's content hash: an edit within the file system's timestamp resolution still counts."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _problem(item: Any) -> str:
    """A cross-field check already names its field; a field's own error gets the loader's wording,
    an unknown key the nearest known one."""
    message = str(item["msg"]).removeprefix("Value error, ")
    if not item["loc"] or (item["type"] == "value_error" and message.startswith(f"{item['loc'][0]}.")):
        return message
    if item["type"] == "extra_forbidden" and len(item["loc"]) == 1:
        key = str(item["loc"][0])
        close = difflib.get_close_matches(key, list(StudyFile.model_fields), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"allowed: {', '.join(StudyFile.model_fields)}"
        return f"{key}: unknown key ({hint}; a method's own cells are `<method>{_METHOD_CELLS}`)"
    return describe_problem(item)
