"""Settings that live with an extension: a plugin's keyword arguments, checked against its
signature, or its own settings model.

A corruption channel or a checker declares its settings as keyword parameters with types and
defaults; `bind_settings` checks a config's `kwargs` mapping against them. A method declares a
Pydantic model (`MethodSpec.settings`); `model_settings` checks `method_kwargs` against it. Either
way an unknown name, a wrong type or an out-of-range value is one line naming `<field>.<key>` before
anything runs.
"""

from __future__ import annotations

import difflib
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from hackable_rl.core.errors import UserError

__all__ = ["bind_settings", "model_settings", "setting_names"]

# A plain `float` setting refuses inf and NaN too, as every config float does (hackable_rl.core.bounds):
# a plugin that annotates `scale: float` cannot be handed `.inf`.
_FINITE_ONLY = ConfigDict(allow_inf_nan=False)


def setting_names(factory: Callable[..., Any], skip: int) -> list[inspect.Parameter]:
    """The keyword settings of `factory`: its parameters after the first `skip` positional ones."""
    parameters = list(inspect.signature(factory).parameters.values())[skip:]
    return [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def bind_settings(factory: Callable[..., Any], kwargs: Mapping[str, Any], field: str, skip: int) -> dict[str, Any]:
    """`kwargs` validated against `factory`'s settings (types from its annotations); returns them
    converted. Raises UserError naming `<field>.<key>` for an unknown key, a wrong type or range."""
    parameters = {p.name: p for p in setting_names(factory, skip)}
    try:
        hints = typing.get_type_hints(factory, include_extras=True)
    except (NameError, TypeError):  # an external plugin with annotations Python cannot resolve
        hints = {}
    bound: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key not in parameters:
            raise UserError(f"{field}.{key}: unknown setting{_nearest(key, list(parameters))}")
        try:
            bound[key] = TypeAdapter(hints.get(key, Any), config=_FINITE_ONLY).validate_python(value)
        except ValidationError as error:
            raise UserError(f"{field}.{key}: {_problem(error, value)}") from None
    return bound


def model_settings(model: type[BaseModel] | None, kwargs: Mapping[str, Any], field: str, owner: str) -> list[str]:
    """Why `kwargs` are not valid settings of `model` (the settings of `owner`), one line each naming
    `<field>.<key>`; nothing when they are. No model: the owner takes no settings."""
    if model is None:
        return [f"{field}: {sorted(kwargs)} given, but {owner} takes none"] if kwargs else []
    try:
        model.model_validate(dict(kwargs))
    except ValidationError as error:
        return [_model_problem(item, field, list(model.model_fields)) for item in error.errors()]
    return []


def _model_problem(item: Mapping[str, Any], field: str, allowed: list[str]) -> str:
    where = ".".join([field, *(str(part) for part in item["loc"])])
    if item["type"] == "extra_forbidden":
        return f"{where}: unknown setting{_nearest(str(item['loc'][-1]), allowed)}"
    message = str(item["msg"])
    if message.startswith("Value error, "):
        return f"{where}: {message.removeprefix('Value error, ')}"
    return f"{where}: got {item.get('input')!r}; {message.replace('Input should be', 'expected')}"


def _problem(error: ValidationError, value: Any) -> str:
    """`1.5 is not in [0, 1]` (a bound's own words) or `got inf; expected a finite number`."""
    message = error.errors()[0]["msg"]
    if message.startswith("Value error, "):
        return message.removeprefix("Value error, ")
    return f"got {value!r}; {message.replace('Input should be', 'expected')}"


def _nearest(name: str, allowed: list[str]) -> str:
    if not allowed:
        return " (this one takes none)"
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return f" ({hint}allowed: {', '.join(allowed)})"
