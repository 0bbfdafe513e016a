"""The pilots file (`pilots.yaml`), typed: a study's validation pilots, declared before they run
(docs/studies.md, "Pilots"). It names the grid of settings the pilots may try, the overrides every pilot
shares (the validation split, the checkpoints evaluated), the seeds, and the rule that chooses a
setting, written before any pilot ran. `hackable-rl condition --pilots FILE --setting NAME` runs one
pilot and refuses a setting outside the grid, naming it.

    grid: [lr5e-4, lr1e-3]                    # the settings, in order (a DVC matrix reads this list)
    settings:
      lr5e-4: [trainer.learning_rate=5.0e-4]  # each setting's --set overrides
      lr1e-3: [trainer.learning_rate=1.0e-3]
    shared: [evaluation.split=validation]     # every pilot's, the base's included
    pilot_seeds: [0]
    confirm_seeds: [1]
    rule: "the cheapest setting whose ..."    # the selection rule, in words
    target_gain: 0.10                         # its numbers, as `hackable-rl pilots` applies them
    fallback_gain: 0.06
    chosen: null                              # the setting the rule chose, once the seed-0 pilots ran
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hackable_rl.config.loading import describe_problem, parse_override, read_yaml
from hackable_rl.core.errors import ConfigError, UserError

__all__ = ["PilotsFile", "load_pilots", "pilot_overrides"]

_SPLIT_KEY = "evaluation.split"


class PilotsFile(BaseModel):
    """A study's validation pilots: the grid, what they share, and the rule that chooses among them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid: list[str]
    """The settings' names, in the order they run (DVC's matrix reads this list)."""
    settings: dict[str, list[str]]
    """Setting name -> its `--set` overrides (on top of `shared` and the params file)."""
    shared: list[str] = []
    """`--set` overrides every pilot and its base share; must keep the evaluation on validation."""
    pilot_seeds: list[int] = [0]
    """The replicates the grid runs on (each its own warm start). Not `seeds`: DVC reads this file beside
    study.yaml as `vars`, and a key both hold is refused."""
    confirm_seeds: list[int] = []
    """The further replicates the chosen setting runs on, once chosen."""
    rule: str
    """The selection rule, in words, fixed before any pilot ran."""
    target_gain: float = Field(gt=0, lt=1)
    """The rule's validation pass@1 gain over the warm start (`hackable-rl pilots` applies it)."""
    fallback_gain: float = Field(gt=0, lt=1)
    """The gain the rule falls back to when no checkpoint reaches `target_gain` (at most target_gain)."""
    chosen: str | None = None
    """The setting the rule chose from the pilots on `pilot_seeds` (null until they have run)."""

    @model_validator(mode="after")
    def _names_agree(self) -> PilotsFile:
        if sorted(self.grid) != sorted(self.settings) or len(set(self.grid)) != len(self.grid):
            raise ValueError(f"grid: {self.grid} must list each of settings' names once ({sorted(self.settings)})")
        if self.chosen is not None and self.chosen not in self.settings:
            raise ValueError(f"chosen: {self.chosen!r} is not in the grid ({', '.join(self.grid)})")
        for name, overrides in {"shared": self.shared, **{f"settings.{k}": v for k, v in self.settings.items()}}.items():
            for text in overrides:
                try:
                    key, value = parse_override(text)
                except ConfigError as error:
                    raise ValueError(f"{name}: {'; '.join(error.problems)}") from None
                if key == _SPLIT_KEY and value != "validation":
                    raise ValueError(f"{name}: {text!r}: pilots tune on validation, never on {value!r}")
        if f"{_SPLIT_KEY}=validation" not in [text.replace(" ", "") for text in self.shared]:
            raise ValueError(f"shared: must hold {_SPLIT_KEY}=validation (pilots tune on validation)")
        if self.fallback_gain > self.target_gain:
            raise ValueError(f"fallback_gain: {self.fallback_gain} exceeds target_gain {self.target_gain}")
        if not self.rule.strip():
            raise ValueError("rule: write the selection rule before any pilot runs")
        return self


def load_pilots(path: Path) -> PilotsFile:
    """The pilots file, parsed; a UserError with one line per problem, naming the file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such pilots file (pass --pilots PATH)")
    try:
        return PilotsFile.model_validate(read_yaml(path))
    except ValidationError as error:
        raise UserError(*(f"{path}: {describe_problem(item)}" for item in error.errors())) from None


def pilot_overrides(path: Path, setting: str | None) -> list[str]:
    """The `--set` overrides of one pilot: the shared ones, then the setting's (none for the base, a
    warm start evaluated as the pilots are); a setting outside the grid is refused, naming the grid."""
    pilots = load_pilots(path)
    if setting is None:
        return list(pilots.shared)
    if setting not in pilots.settings:
        raise UserError(f"{path}: --setting {setting!r} is not in the declared grid ({', '.join(pilots.grid)})")
    return [*pilots.shared, *pilots.settings[setting]]
