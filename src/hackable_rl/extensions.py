"""Every extension point, in one place: importing this module registers the built-ins, and
`config_problems` checks a config's names against the registries (with the nearest name).

| config field                  | registry        | built-ins live in            |
| ----------------------------- | --------------- | ---------------------------- |
| `data.provider`, curriculum   | DATA_PROVIDERS  | data/providers.py, arith.py  |
| `objective.rewards`           | REWARDS         | reward/functions.py          |
| `objective.name`              | OBJECTIVES      | reward/objectives.py         |
| `verifier.members[].checker`  | CHECKERS        | reward/checkers.py, early_stop.py, off_by_one.py |
| `corruption.channel` + kwargs | CHANNELS        | reward/corruption.py         |
| `verifier.aggregation`        | AGGREGATIONS    | reward/ensemble.py           |
| `method`                      | METHODS         | reward/methods/              |
| `evaluation.metrics`          | REPORT_METRICS  | evaluation/report_metrics.py |

Any of these names may instead be `package.module:attr` (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import hackable_rl.data  # noqa: F401  (registers the data providers)
import hackable_rl.evaluation.report_metrics  # noqa: F401  (registers the report metrics)
import hackable_rl.reward.corruption  # noqa: F401  (registers the channels and, through it, the checkers)
import hackable_rl.reward.ensemble  # noqa: F401  (registers the aggregations)
import hackable_rl.reward.functions  # noqa: F401  (registers the rewards)
import hackable_rl.reward.methods  # noqa: F401  (registers the methods)
import hackable_rl.reward.objectives  # noqa: F401  (registers the objectives)
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import load_config
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.registry import (
    AGGREGATIONS,
    CHANNELS,
    CHECKERS,
    DATA_PROVIDERS,
    METHODS,
    OBJECTIVES,
    REFERENCE,
    REPORT_METRICS,
    REWARDS,
    Registry,
    RegistryError,
)
from hackable_rl.core.settings import model_settings
from hackable_rl.reward.checkers import checker_settings
from hackable_rl.reward.corruption import channel_settings
from hackable_rl.reward.pipeline import build_reward_pipeline

__all__ = ["config_problems", "check_config", "resolve_config", "load_resolved", "check_builds", "reference_method", "restates_accuracy", "exploits_of"]


def _problem(registry: Registry, name: str, where: str) -> str | None:
    """Why `name` does not name a `registry` item (None when it does), located at `where`."""
    if name in registry:
        return None
    if ":" not in name:
        return f"{where}: {registry.unknown(name)}"
    try:
        registry.load(name)
    except RegistryError as error:
        return f"{where}: {str(error).removeprefix(f'{registry.field}: ')}"
    return None


def _named(config: ExperimentConfig) -> list[tuple[Registry, str, str]]:
    """(registry, name, where) for every registry name the config holds."""
    named = [
        (DATA_PROVIDERS, config.data.provider, "data.provider"),
        (AGGREGATIONS, config.verifier.aggregation, "verifier.aggregation"),
        (METHODS, config.method, "method"),
    ]
    named += [(DATA_PROVIDERS, s.provider, f"data.curriculum.sources[{i}].provider")
              for i, s in enumerate(config.data.curriculum.sources)]
    named += [(REWARDS, name, f"objective.rewards[{i}]") for i, name in enumerate(config.objective.rewards)]
    if config.objective.class_path is None:
        named.append((OBJECTIVES, config.objective.name, "objective.name"))
    named += [(CHECKERS, m.checker, f"verifier.members[{i}].checker") for i, m in enumerate(config.verifier.members)]
    named += [(REPORT_METRICS, name, f"evaluation.metrics[{i}]") for i, name in enumerate(config.evaluation.metrics)]
    if config.corruption.channel != "none":
        named.append((CHANNELS, config.corruption.channel, "corruption.channel"))
    return named


def config_problems(config: ExperimentConfig, refusals: bool = True) -> list[str]:
    """One line per name in `config` that no registry holds (nearest name suggested), per setting an
    extension does not take (`corruption.kwargs`, `method_kwargs`, `checker_kwargs`) and, with
    `refusals`, per reason the method refuses to run under `config` (its `check_config`)."""
    problems = [p for registry, name, where in _named(config) if (p := _problem(registry, name, where))]
    problems += _checker_setting_problems(config, problems)
    if not any(p.startswith("method:") for p in problems):
        problems += _method_problems(config, refusals)
    return problems + _channel_problems(config, problems)


def _method_problems(config: ExperimentConfig, refusals: bool) -> list[str]:
    """The method's settings (`method_kwargs`) against its model, then its own `check_config`."""
    method = METHODS.get(config.method)
    problems = model_settings(method.settings, config.method_kwargs, "method_kwargs", f"method {config.method}")
    return problems or (method.check_config(config) if refusals else [])


def _checker_setting_problems(config: ExperimentConfig, problems: list[str]) -> list[str]:
    """Each member's `checker_kwargs` against its checker's settings (a checker that does not
    resolve is already a problem)."""
    lines = []
    for index, member in enumerate(config.verifier.members):
        where = f"verifier.members[{index}]"
        if any(p.startswith(f"{where}.checker:") for p in problems):
            continue
        try:
            checker_settings(member.checker, member.checker_kwargs, f"{where}.checker_kwargs")
        except UserError as error:
            lines.extend(error.problems)
    return lines


def _channel_problems(config: ExperimentConfig, problems: list[str]) -> list[str]:
    """`corruption.kwargs` against the channel's settings (a channel that does not resolve is
    already a problem)."""
    channel = config.corruption.channel
    if channel == "none":
        given = sorted(config.corruption.kwargs)
        return [f"corruption.kwargs: {given} given, but channel none takes none"] if given else []
    if any(p.startswith("corruption.channel:") for p in problems):
        return []
    try:
        channel_settings(channel, config.corruption.kwargs)
    except UserError as error:
        return list(error.problems)
    return []


def check_config(
    config: ExperimentConfig, source: str | None = None, refusals: bool = True
) -> ExperimentConfig:
    """`config` when every name in it resolves; else ConfigError with one line per problem. Without
    `refusals`, a method that refuses to run under `config` is left for the caller to record."""
    problems = config_problems(config, refusals)
    if problems:
        raise ConfigError(problems, source)
    return config


resolve_config = check_config
"""Resolving a loaded config: every name it holds to its extension, and each extension's settings."""


def load_resolved(
    path: str | Path = "params.yaml", overrides: Iterable[str] = (), refusals: bool = True
) -> ExperimentConfig:
    """`config_loading.load_config` (read, override, validate), then `resolve_config`."""
    return resolve_config(load_config(path, overrides), str(path), refusals)


def check_builds(config: ExperimentConfig) -> None:
    """Builds the reward pipeline once (no model), so that a reward, objective or checker that loads
    but cannot be built or called as its contract says fails in a second, not after the model loaded."""
    build_reward_pipeline(config)


# --------------------------------------------------------------------------- what reports read


def reference_method() -> str:
    """The registered method every other method of a study is compared against (`report_role`)."""
    names = [name for name, spec in METHODS.items() if spec.report_role == REFERENCE]
    if len(names) != 1:
        raise UserError(f"exactly one registered method must have report_role {REFERENCE!r}; found {names}")
    return names[0]


def restates_accuracy(channel: str) -> bool:
    """Whether under `channel` the hacking gap restates accuracy (`ChannelSpec.restates_accuracy`);
    False for a name that does not resolve."""
    try:
        return CHANNELS.get(channel).restates_accuracy
    except RegistryError:
        return False


def exploits_of(checkers: list[str]) -> list[str]:
    """The canonical exploits the `checkers` declare (`CheckerSpec.exploits`), in their order."""
    names = [exploit.name for checker in dict.fromkeys(checkers) for exploit in CHECKERS.get(checker).exploits]
    return list(dict.fromkeys(names))
