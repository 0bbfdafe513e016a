"""The objective, the reward's fifth step: how the per-completion rewards combine into the one
scalar GRPO optimises.

An objective is a class built from `ObjectiveConfig` with two methods: `reward_names()` (the
reward components it needs, computed by `Components`) and `combine(components, ...)` (one float
per completion). `objective.class_path: "package.module:Class"` loads any class with that
interface; `objective.name` picks a registered one.

In training, the `correctness_reward` component (the reward that declares
`needs("verifier_reward")`) is the method's optimised reward (aggregate or robust-shaped), not the
clean correctness; every other component is a plain reward function from `REWARDS`
(`functions.py`), given what it declares it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import hackable_rl.reward.functions  # noqa: F401  (registers the built-in rewards)
from hackable_rl.config.experiment import ExperimentConfig, ObjectiveConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import OBJECTIVES, REWARDS, RegistryError, build_reward, register_objective

__all__ = ["Components", "TokenGRPOObjective", "LatentNeuraleseObjective", "build_objective"]

FORMAT = "format_tag_reward"
CORRECTNESS = "correctness_reward"
LENGTH = "length_penalty_reward"
UTILISATION = "token_utilisation_reward"


@register_objective("token_grpo")
class TokenGRPOObjective:
    """Section 4 of the spec: `additive` or `weighted_length_penalty`, optionally gated on format."""

    def __init__(self, config: ObjectiveConfig):
        self.config = config

    def reward_names(self) -> list[str]:
        """Components the pipeline must compute, in a stable order (the gate needs r_f)."""
        if self.config.mode == "additive":
            names = list(self.config.rewards)
        else:
            names = [CORRECTNESS, FORMAT, LENGTH] + [UTILISATION] * (UTILISATION in self.config.rewards)
        if self.config.strict_format_gate and FORMAT not in names:
            names.append(FORMAT)
        return names

    def combine(self, components: Mapping[str, Sequence[float]], **columns: Any) -> list[float]:
        """One reward per completion from the named components (floats, missing already imputed)."""
        count = _check_components(components, self.reward_names())
        combined = [self._combine_one(components, i) for i in range(count)]
        if self.config.strict_format_gate:
            penalty = self.config.non_strict_penalty
            combined = [
                penalty if components[FORMAT][i] <= 0.5 else value for i, value in enumerate(combined)
            ]
        return combined

    def _combine_one(self, components: Mapping[str, Sequence[float]], i: int) -> float:
        if self.config.mode == "additive":
            return sum(components[name][i] for name in self.config.rewards)
        r_c, r_f, r_l = components[CORRECTNESS][i], components[FORMAT][i], components[LENGTH][i]
        interaction = r_c * r_l
        if self.config.length_penalty_interaction == "correctness_length_format":
            interaction *= r_f
        total = self.config.correctness_weight * r_c + self.config.length_penalty_lambda * interaction + r_f
        if UTILISATION in self.config.rewards:
            total += components[UTILISATION][i]
        return total


def _check_components(components: Mapping[str, Sequence[float]], names: list[str]) -> int:
    """Every needed component is present, equally long and free of None; returns the length."""
    absent = [name for name in names if name not in components]
    if absent:
        raise ValueError(f"objective needs components {absent}; got {sorted(components)}")
    lengths = {name: len(components[name]) for name in names}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"components differ in length: {lengths}")
    for name in names:
        if any(value is None for value in components[name]):
            raise ValueError(f"component {name!r} holds None: impute missing rewards before combining")
    return next(iter(lengths.values()), 0)


@register_objective("latent_neuralese")
class LatentNeuraleseObjective(TokenGRPOObjective):
    """The extension point for latent ("neuralese") reasoning: token rewards plus `extra_reward`.

    `extra_reward` is the one intentional no-op in the framework: it returns 0.0 per completion
    until latent-state scores exist. Subclass and override it (and point `objective.class_path`
    at the subclass) to add a score; everything else is inherited unchanged.
    """

    def extra_reward(self, completions: Sequence[Any], **columns: Any) -> list[float]:
        """Latent-state score per completion. Intentionally 0.0: the hook, not a feature."""
        return [0.0] * len(completions)

    def combine(
        self, components: Mapping[str, Sequence[float]], completions: Sequence[Any] = (), **columns: Any
    ) -> list[float]:
        token = super().combine(components)
        extra = self.extra_reward(completions or [None] * len(token), **columns)
        return [value + bonus for value, bonus in zip(token, extra, strict=True)]


def build_objective(config: ExperimentConfig) -> Any:
    """The configured objective: `objective.class_path` when set, else the registered `objective.name`."""
    field, target = (
        ("objective.class_path", config.objective.class_path)
        if config.objective.class_path
        else (
            "objective.name",
            config.objective.name,
        )
    )
    try:
        cls = OBJECTIVES.load(target) if field == "objective.class_path" else OBJECTIVES.get(target)
    except RegistryError as error:
        raise UserError(f"{field}: {error}") from None
    objective = cls(config.objective)
    for method in ("reward_names", "combine"):
        if not callable(getattr(objective, method, None)):
            raise UserError(
                f"{field}: {target!r} has no {method}() method (an objective needs reward_names and combine)"
            )
    return objective


class Components:
    """The objective's reward components, built once from the config: each reward function with its
    static options (`rewards.kwargs`) and what it declares it needs bound; the verifier's own
    component is the optimised reward itself."""

    def __init__(self, config: ExperimentConfig, names: Sequence[str], tokenizer: Any = None):
        self.config = config
        self._needs = {name: REWARDS.get(name).needs for name in names}
        self._functions = {name: self._bound(name, tokenizer) for name in names}

    def _bound(self, name: str, tokenizer: Any) -> Callable[..., list[float | None]] | None:
        """The reward `name` with its static options bound; None for the verifier's own component."""
        needs = self._needs[name]
        if "verifier_reward" in needs:
            return None
        options = dict(self.config.rewards.kwargs.get(name, {}))
        if "tags" in needs:
            options.setdefault("open_tag", self.config.rewards.think_open)
            options.setdefault("close_tag", self.config.rewards.think_close)
        if "tokenizer" in needs and tokenizer is not None:
            options.setdefault("tokenizer", tokenizer)
        return build_reward(name, **options)

    def __call__(self, texts: list[str], optimised: list[float], columns: dict[str, Any]) -> dict[str, list[float]]:
        """Each component's reward per completion (a missing one imputed with
        `trainer.missing_reward_value`), given the optimised reward (missing already imputed)."""
        components: dict[str, list[float]] = {}
        fill = self.config.trainer.missing_reward_value
        for name, reward in self._functions.items():
            if reward is None:
                components[name] = optimised
                continue
            correctness = {"correctness": optimised} if "correctness" in self._needs[name] else {}
            values = reward(texts, **columns, **correctness)
            components[name] = [fill if value is None else float(value) for value in values]
        return components
