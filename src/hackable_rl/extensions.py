"""Every extension point, in one place: importing this module registers the built-ins, and
`config_problems` checks a config's names against the registries (with the nearest name).

| config field                  | registry        | built-ins live in            |
| ----------------------------- | --------------- | ---------------------------- |
| `data.provider`, curriculum   | DATA_PROVIDERS  | data/providers.py, arith.py  |
| `objective.rewards`           | REWARDS         | rewards/functions.py         |
| `objective.name`              | OBJECTIVES      | objectives.py                |
| `verifier.members[].checker`  | CHECKERS        | verifiers/checkers.py        |
| `corruption.channel` + kwargs | CHANNELS        | verifiers/corruption.py      |
| `verifier.aggregation`        | AGGREGATIONS    | verifiers/ensemble.py        |
| `method`                      | METHODS         | methods/                     |
| `evaluation.metrics`          | REPORT_METRICS  | evaluation/report_metrics.py |

Any of these names may instead be `package.module:attr` (docs/extending.md).
"""

from __future__ import annotations

import hackable_rl.data  # noqa: F401  (registers the data providers)
import hackable_rl.evaluation.report_metrics  # noqa: F401  (registers the report metrics)
import hackable_rl.methods  # noqa: F401  (registers the methods)
import hackable_rl.objectives  # noqa: F401  (registers the objectives)
import hackable_rl.rewards  # noqa: F401  (registers the rewards)
import hackable_rl.verifiers.corruption  # noqa: F401  (registers the channels and, through it, the checkers)
import hackable_rl.verifiers.ensemble  # noqa: F401  (registers the aggregations)
from hackable_rl.config import ExperimentConfig
from hackable_rl.errors import ConfigError, UserError
from hackable_rl.registry import (
    AGGREGATIONS,
    CHANNELS,
    CHECKERS,
    DATA_PROVIDERS,
    METHODS,
    OBJECTIVES,
    REPORT_METRICS,
    REWARDS,
    Registry,
    RegistryError,
)
from hackable_rl.scoring import build_reward_pipeline
from hackable_rl.verifiers.corruption import channel_settings

__all__ = ["config_problems", "check_config", "check_builds"]


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


def config_problems(config: ExperimentConfig) -> list[str]:
    """One line per name in `config` that no registry holds (nearest name suggested), and per
    `corruption.kwargs` setting the channel does not take."""
    problems = [p for registry, name, where in _named(config) if (p := _problem(registry, name, where))]
    if not any(p.startswith("method:") for p in problems):
        problems.extend(METHODS.get(config.method).check_config(config))
    channel = config.corruption.channel
    if channel == "none":
        if config.corruption.kwargs:
            problems.append(f"corruption.kwargs: {sorted(config.corruption.kwargs)} given, but channel none takes none")
    elif not any(p.startswith("corruption.channel:") for p in problems):
        try:
            channel_settings(channel, config.corruption.kwargs)
        except UserError as error:
            problems.extend(error.problems)
    return problems


def check_config(config: ExperimentConfig, source: str | None = None) -> ExperimentConfig:
    """`config` when every name in it resolves; else ConfigError with one line per problem."""
    problems = config_problems(config)
    if problems:
        raise ConfigError(problems, source)
    return config


def check_builds(config: ExperimentConfig) -> None:
    """Builds the reward pipeline once (no model), so that a reward, objective or checker that loads
    but cannot be built or called as its contract says fails in a second, not after the model loaded."""
    build_reward_pipeline(config)
