"""`corruption.selector`: a metadata condition `<key> <op> <value>` that decides which examples a
selected channel (`missing`, `bias`) touches; numbers compare as numbers, the rest as text."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

from hackable_rl.core.errors import UserError

__all__ = ["Selector"]

_COMPARISONS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_SELECTOR = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(==|!=|<=|>=|<|>)\s*(.+?)\s*$")


@dataclass(frozen=True, slots=True)
class Selector:
    """A metadata condition `<key> <op> <value>`; numbers compare as numbers, the rest as text."""

    key: str
    op: str
    value: Any

    @classmethod
    def parse(cls, text: str, field: str = "corruption.selector") -> Selector:
        match = _SELECTOR.match(text)
        if not match:
            raise UserError(
                f"{field}: {text!r} is not `<key> <op> <value>` with op one of {', '.join(_COMPARISONS)} "
                f"(e.g. 'n_steps >= 3', 'level >= 4', 'subject == Algebra')"
            )
        key, op, raw = match.groups()
        return cls(key, op, _literal(raw))

    def matches(self, metadata: dict[str, Any]) -> bool:
        if self.key not in metadata:
            return False
        actual = metadata[self.key]
        if isinstance(self.value, float):
            actual = _as_number(actual)
            if actual is None:
                return False
        elif not isinstance(actual, str):
            actual = str(actual)
        return _COMPARISONS[self.op](actual, self.value)


def _literal(raw: str) -> Any:
    number = _as_number(raw)
    return number if number is not None else raw.strip("'\"")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
