"""What a study file declares before it runs: its replicates, its primary outcomes and the family of
comparisons Holm's correction runs over (docs/studies.md, "Declaring a study").

Only these declarations are checked here; the grid itself (cells, rates, methods, overrides) is read
by `experiments.cells` and `experiments.study`, which name their own problems. `hackable-rl validate
--study FILE` and every study's payoff stage (the first stage that reads the grid) refuse a study
whose declarations do not hold, with one line naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hackable_rl.config.loading import describe_problem, read_yaml
from hackable_rl.core.errors import ConfigError

__all__ = ["MIN_PRIMARY_REPLICATES", "StudyDeclaration", "load_study_declaration"]

MIN_PRIMARY_REPLICATES = 5
"""Primary outcomes need at least this many replicates (whole pipeline seeds, warm start included)."""


class StudyDeclaration(BaseModel):
    """The declarations of a study file; every other key (the grid) passes through unchecked here."""

    model_config = ConfigDict(extra="allow", frozen=True)

    seeds: list[int] = Field(min_length=1)
    """The replicates: each a whole pipeline seed, its own warm start included."""
    primary_outcomes: list[str] = Field(min_length=1)
    """The outcomes the study is run to decide, named as in its metrics/outcomes.json."""
    family: list[str] = Field(min_length=1)
    """The primary outcomes Holm's correction adjusts together (each a name in `primary_outcomes`);
    every comparison under one of these names is in the family, the others are reported unadjusted."""
    primary_replicates: int = Field(default=MIN_PRIMARY_REPLICATES, ge=2)
    """How many replicates the primary outcomes are declared with: `seeds` must hold at least as many,
    and fewer than MIN_PRIMARY_REPLICATES only with `small_n_reason`."""
    small_n_reason: str | None = None
    """Why the study declares fewer replicates than the spec asks (its report labels the small n)."""
    budget_hours: float | None = Field(default=None, gt=0)
    """The wall time the study must fit on 2 CPU cores; `validate --study` refuses settings whose
    estimate (`experiments.budget`) exceeds it. null: no budget declared."""

    @model_validator(mode="after")
    def _declarations_agree(self) -> StudyDeclaration:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: a seed is listed twice (each replicate once)")
        if self.primary_replicates < MIN_PRIMARY_REPLICATES and not (self.small_n_reason or "").strip():
            raise ValueError(f"primary_replicates: {self.primary_replicates} is below the spec's "
                             f"{MIN_PRIMARY_REPLICATES}; declare why in small_n_reason, or run {MIN_PRIMARY_REPLICATES}")
        if len(self.seeds) < self.primary_replicates:
            raise ValueError(f"seeds: {len(self.seeds)} replicates, but the primary outcomes are declared with "
                             f"{self.primary_replicates} (primary_replicates)")
        unknown = [name for name in self.family if name not in self.primary_outcomes]
        if unknown:
            raise ValueError(f"family: {', '.join(unknown)} not among primary_outcomes")
        return self


def load_study_declaration(study_file: Path) -> StudyDeclaration:
    """The study file's declarations; a ConfigError with one line per problem, naming the file."""
    data: dict[str, Any] = read_yaml(Path(study_file))
    try:
        return StudyDeclaration.model_validate(data)
    except ValidationError as error:
        raise ConfigError([f"{study_file}: {_problem(item)}" for item in error.errors()]) from None


def _problem(item: Any) -> str:
    """A cross-field check already names its field; a field's own error gets the loader's wording."""
    if not item["loc"]:
        return str(item["msg"]).removeprefix("Value error, ")
    return describe_problem(item)
