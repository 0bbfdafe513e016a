"""One small Registry type and the project's registries.

Rewards, data providers, objectives and verifier checkers register themselves by name with a
decorator at import time. A name that is not registered may be a `"package.module:attr"` string,
which loads external code without touching this package.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = [
    "Registry",
    "RegistryError",
    "DATA_PROVIDERS",
    "REWARDS",
    "OBJECTIVES",
    "CHECKERS",
    "register_data_provider",
    "register_reward",
    "register_objective",
    "register_checker",
    "build_reward",
    "import_from_path",
]


class RegistryError(LookupError):
    """An unknown name or an external path that does not load; the message lists what is valid."""


def import_from_path(path: str) -> Any:
    """Loads `package.module:attr` (attr may be dotted). Raises RegistryError with the reason."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise RegistryError(f"{path!r}: expected 'package.module:attr'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise RegistryError(f"{path!r}: cannot import module {module_name!r} ({error})") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise RegistryError(f"{path!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


class Registry(Generic[T]):
    """Name -> object, filled by a decorator; `get` also accepts `module:attr` strings."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str | None = None) -> Callable[[T], T]:
        def decorate(item: T) -> T:
            key = name or getattr(item, "__name__", None)
            if not key:
                raise RegistryError(f"{self.kind}: pass a name to register {item!r}")
            if key in self._items and self._items[key] is not item:
                raise RegistryError(f"{self.kind} {key!r} is already registered")
            self._items[key] = item
            return item

        return decorate

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if ":" in name:
            return import_from_path(name)
        raise RegistryError(f"unknown {self.kind} {name!r}; valid: {', '.join(sorted(self._items)) or '(none)'}")

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items


DATA_PROVIDERS: Registry[Callable[..., Any]] = Registry("data provider")
REWARDS: Registry[Callable[..., list[float | None]]] = Registry("reward")
OBJECTIVES: Registry[type] = Registry("objective")
CHECKERS: Registry[Callable[..., Any]] = Registry("checker")

register_data_provider = DATA_PROVIDERS.register
register_reward = REWARDS.register
register_objective = OBJECTIVES.register
register_checker = CHECKERS.register


def build_reward(name: str, **yaml_kwargs: Any) -> Callable[..., list[float | None]]:
    """The reward `name` with its static options (from `rewards.kwargs.<name>`) partially applied.

    The result keeps TRL's contract `(completions, **columns) -> list[float | None]` and a
    `__name__` (TRL names its reward columns after it).
    """
    reward = REWARDS.get(name)
    if not yaml_kwargs:
        return reward
    bound = functools.partial(reward, **yaml_kwargs)
    functools.update_wrapper(bound, reward)
    return bound
