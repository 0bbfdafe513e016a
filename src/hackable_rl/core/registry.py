"""One small Registry type and the project's registries: every extension point.

Data providers, rewards, objectives, checkers, corruption channels, aggregations, methods and
report metrics register themselves by name with a decorator at import time. Rewards, checkers,
channels and methods are held as small frozen dataclasses (`core.specs`, handed out here too) whose
fields are what they declare
(`RewardSpec.needs`, `CheckerSpec.superset_of_clean` / `exploits`, `ChannelSpec.restates_accuracy`,
`MethodSpec.check_config` / `keeps_group_mean` / `settings` / `report_role`): the decorator takes
those fields as keywords and returns the plain function unchanged; a `module:attr` may name a spec or
a plain function (which then declares nothing). A name that is not
registered may be a `"package.module:attr"` string, which loads external code without touching
this package. `hackable_rl.extensions` imports the built-in ones and checks a config's names.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from hackable_rl.core.errors import RegistryError
from hackable_rl.core.specs import (
    NEEDS,
    REFERENCE,
    TREATMENT,
    ChannelSpec,
    CheckerSpec,
    Exploit,
    MethodSpec,
    RewardSpec,
)

T = TypeVar("T")

__all__ = [
    "ChannelSpec",
    "CheckerSpec",
    "Exploit",
    "MethodSpec",
    "Registry",
    "RegistryError",
    "RewardSpec",
    "DATA_PROVIDERS",
    "REWARDS",
    "OBJECTIVES",
    "CHECKERS",
    "CHANNELS",
    "AGGREGATIONS",
    "METHODS",
    "REPORT_METRICS",
    "NEEDS",
    "REFERENCE",
    "TREATMENT",
    "register_data_provider",
    "register_reward",
    "register_objective",
    "register_checker",
    "register_channel",
    "register_aggregation",
    "register_method",
    "register_report_metric",
    "build_reward",
    "import_from_path",
]


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def import_from_path(path: str) -> Any:
    """Loads `package.module:attr` (attr may be dotted). Raises RegistryError with the reason."""
    module_name, sep, attr = path.partition(":")
    if not sep or not _DOTTED.fullmatch(module_name) or not _DOTTED.fullmatch(attr):
        raise RegistryError(f"{path!r}: expected 'package.module:attr'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise RegistryError(f"{path!r}: cannot import module {module_name!r} ({error})") from None
    except SyntaxError as error:
        raise RegistryError(
            f"{path!r}: module {module_name!r} has a syntax error ({error.filename}:{error.lineno}: {error.msg})"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise RegistryError(f"{path!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


def signature_problem(item: Any, contract: str, *args: Any, **kwargs: Any) -> str | None:
    """Why `item` cannot be called as `item(*args, **kwargs)` (None when it can, or when Python cannot
    tell: some builtins have no signature). `contract` describes the expected call in the message.
    A parameter the probe leaves out is fine: `rewards.kwargs` may supply it."""
    if not callable(item):
        return f"is {type(item).__name__} {item!r:.60}, not a function; expected {contract}"
    try:
        signature = inspect.signature(item)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind_partial(*args, **kwargs)
    except TypeError:
        name = getattr(item, "__qualname__", type(item).__name__)
        return f"is {name}{signature}, which cannot be called as {contract}"
    return None


def _as_spec(kind: type) -> Callable[..., Any]:
    """Registration wrapper: a plain function becomes `kind(function, **declared)`; a spec stays."""

    def wrap(item: Any, **declared: Any) -> Any:
        if isinstance(item, kind):
            return item
        return kind(item, **declared)

    return wrap


class Registry(Generic[T]):
    """Name -> object, filled by a decorator; `get` also accepts `module:attr` strings.

    `check(obj)` returns why an object loaded from `module:attr` is the wrong kind of thing for this
    registry (None when it fits), so a wrong path fails when it is named, not mid-run.
    `field` names the config field that holds such names, for the error message.
    """

    def __init__(
        self,
        kind: str,
        field: str | None = None,
        check: Callable[[Any], str | None] | None = None,
        spec: type | None = None,
    ):
        self.kind = kind
        self.field = field
        self.check = check
        self.wrap = _as_spec(spec) if spec else None
        self._items: dict[str, T] = {}

    def register(self, name: str | None = None, **declared: Any) -> Callable[[Any], Any]:
        """A decorator that registers its function (wrapped in the registry's spec with `declared`
        fields, for rewards, checkers and methods) and returns the function unchanged."""

        def decorate(item: Any) -> Any:
            key = name or getattr(item, "__name__", None)
            if not key:
                raise RegistryError(f"{self.kind}: pass a name to register {item!r}")
            entry = self.wrap(item, **declared) if self.wrap else item
            if key in self._items and _unwrapped(self._items[key]) is not _unwrapped(entry):
                raise RegistryError(f"{self.kind} {key!r} is already registered")
            self._items[key] = entry
            return item

        return decorate

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if ":" in name:
            return self.load(name)
        raise RegistryError(f"{self._where()}{self.unknown(name)}")

    def unknown(self, name: str) -> str:
        """Why `name` is not valid: the nearest registered name, then every valid one."""
        close = difflib.get_close_matches(name, self._items, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        valid = ", ".join(sorted(self._items)) or "(none)"
        return f"unknown {self.kind} {name!r}{hint}; valid: {valid} or 'package.module:attr'"

    def load(self, path: str) -> T:
        """The external object at `package.module:attr`, checked to be of this registry's kind."""
        try:
            item = import_from_path(path)
        except RegistryError as error:
            raise RegistryError(f"{self._where()}{error}") from None
        problem = self.check(_unwrapped(item)) if self.check else None
        if problem:
            raise RegistryError(f"{self._where()}{self.kind} {path!r} {problem}")
        return self.wrap(item) if self.wrap else item

    def _where(self) -> str:
        return f"{self.field}: " if self.field else ""

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) of every registered item, in registration order."""
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items


def _unwrapped(item: Any) -> Any:
    """The function inside a spec (the item itself for registries without one)."""
    return item.function if isinstance(item, RewardSpec | MethodSpec | CheckerSpec | ChannelSpec) else item


# What a `module:attr` must accept to be each kind of plugin (probe calls; nothing is run).
DATA_PROVIDERS: Registry[Callable[..., Any]] = Registry(
    "data provider",
    "data.provider",
    lambda item: signature_problem(item, "provider(config: DataConfig, seed: int) -> ProviderOutput", None, 0),
)
REWARDS: Registry[RewardSpec] = Registry(
    "reward",
    "objective.rewards",
    lambda item: signature_problem(
        item, "reward(completions, **columns) -> list[float | None]", [], prompts=[], any_other_column=None
    ),
    RewardSpec,
)
OBJECTIVES: Registry[type] = Registry(
    "objective",
    None,
    lambda item: (
        signature_problem(item, "Objective(config: ObjectiveConfig)", None)
        if inspect.isclass(item)
        else f"is {type(item).__name__} {item!r:.60}, not a class; expected an objective class (reward_names, combine)"
    ),
)
CHECKERS: Registry[CheckerSpec] = Registry(
    "checker",
    "verifier.members[].checker",
    lambda item: signature_problem(
        item, "checker(completion, example, options=options) -> Verdict", "", None, options=None
    ),
    CheckerSpec,
)

CHANNELS: Registry[ChannelSpec] = Registry(
    "corruption channel",
    "corruption.channel",
    lambda item: signature_problem(item, "channel(rate, options, **corruption.kwargs) -> Channel", 0.0, None),
    ChannelSpec,
)
AGGREGATIONS: Registry[Callable[..., Any]] = Registry(
    "aggregation",
    "verifier.aggregation",
    lambda item: signature_problem(item, "aggregation(rewards [N, M], confidences [N, M]) -> [N]", None, None),
)
METHODS: Registry[MethodSpec] = Registry(
    "method",
    "method",
    lambda item: signature_problem(item, "method(ensemble: EnsembleRewards, config) -> optimised [N]", None, None),
    MethodSpec,
)
REPORT_METRICS: Registry[Callable[..., Any]] = Registry(
    "report metric",
    "evaluation.metrics",
    lambda item: signature_problem(item, "metric(records: list[EvaluationRecord]) -> float | None", []),
)

register_data_provider = DATA_PROVIDERS.register
register_reward = REWARDS.register
register_objective = OBJECTIVES.register
register_checker = CHECKERS.register
register_channel = CHANNELS.register
register_aggregation = AGGREGATIONS.register
register_method = METHODS.register
register_report_metric = REPORT_METRICS.register


def build_reward(name: str, **yaml_kwargs: Any) -> Callable[..., list[float | None]]:
    """The reward `name` with its static options (from `rewards.kwargs.<name>`) partially applied.

    The result keeps TRL's contract `(completions, **columns) -> list[float | None]` and a
    `__name__` (TRL names its reward columns after it).
    """
    reward = REWARDS.get(name).function
    if not yaml_kwargs:
        return reward
    bound = functools.partial(reward, **yaml_kwargs)
    functools.update_wrapper(bound, reward)
    return bound
