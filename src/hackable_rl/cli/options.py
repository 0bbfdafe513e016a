"""What every `hackable-rl` command shares: the --config/--set options and loading the config they name."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.extensions import load_resolved

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="params YAML file.")]
def _one_value_per_key(values: list[str] | None) -> list[str] | None:
    """A key given twice on one command line is refused (which value was meant is not for the tool to
    guess; a later one silently winning hides a typo in the earlier)."""
    seen: dict[str, str] = {}
    for text in values or []:
        key = text.split("=", 1)[0].strip()
        if key in seen:
            raise typer.BadParameter(f"{key} is set twice ({seen[key]!r}, then {text!r}); give each key once")
        seen[key] = text
    return values


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", callback=_one_value_per_key,
                 help="Override one value, e.g. --set corruption.rate=0.4 (repeatable, each key once)."),
]



class ResumeMode(StrEnum):
    never = "never"
    auto = "auto"


def model_config(config: Path, overrides: list[str] | None, refusals: bool = True) -> ExperimentConfig:
    """`command_config` for the commands that run a model: torch's threads and determinism set first, and
    no library progress bars for loading and saving weights."""
    from hackable_rl.config.extras import check_extras
    from hackable_rl.config.runtime import quiet_library_progress_bars, use_torch_settings

    resolved = command_config(config, overrides, refusals)
    check_extras(resolved)
    use_torch_settings(resolved)
    quiet_library_progress_bars()
    return resolved


def command_config(config: Path, overrides: list[str] | None, refusals: bool = True) -> ExperimentConfig:
    """The validated config; with tracking on, MLFLOW_TRACKING_URI is checked here too, so that an
    unknown scheme fails before any work rather than when the first metric is logged."""
    from hackable_rl.config.extras import check_store_extras
    from hackable_rl.tracking.store import tracking_uri

    resolved = load_resolved(config, overrides or [], refusals)
    if resolved.tracking.enabled:
        check_store_extras(tracking_uri(resolved.storage.cache_dir))
    return resolved
