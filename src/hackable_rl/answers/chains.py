"""The arithmetic chain of a synthetic problem and the wrong answers a policy reaches from it.

An arith prompt's metadata (`data/arith.py`) holds its chain: `operands` (the starting number, then
one per operation) and `operators`. A policy's wrong answer often is the chain's value under one
systematic mistake: stopping one operation early, dropping or repeating an operation, flipping an
operator's sign, swapping a subtraction's operands, or landing one off the answer. These plain
functions compute those values, so that a flawed checker (`reward/early_stop.py`), the error
classifier (`evaluation/error_patterns.py`) and their tests agree on what each pattern means.
Plain Python: the judge's import path reaches this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Chain", "chain_of"]

_OPERATORS = ("+", "-", "*")


def _apply(operator: str, left: int, right: int) -> int:
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    return left * right


@dataclass(frozen=True)
class Chain:
    """A problem's computation: `start`, then `steps` as (operator, operand) pairs, in order."""

    start: int
    steps: tuple[tuple[str, int], ...]

    @property
    def answer(self) -> int:
        return self.value_of(self.steps)

    def value_of(self, steps: tuple[tuple[str, int], ...]) -> int:
        """The value of `start` followed by `steps`."""
        value = self.start
        for operator, operand in steps:
            value = _apply(operator, value, operand)
        return value

    def stopped_early(self) -> int:
        """The value one operation before the end (for a one-step chain, the starting number)."""
        return self.value_of(self.steps[:-1])

    def one_dropped(self) -> set[int]:
        """Values with one operation left out, other than the last (leaving out the last is stopping early)."""
        return {self.value_of(self.steps[:i] + self.steps[i + 1:]) for i in range(len(self.steps) - 1)}

    def one_repeated(self) -> set[int]:
        """Values with one operation applied twice in a row."""
        return {self.value_of(self.steps[:i + 1] + self.steps[i:]) for i in range(len(self.steps))}

    def one_sign_flipped(self) -> set[int]:
        """Values with one `+` read as `-` or one `-` as `+`."""
        flipped = {"+": "-", "-": "+"}
        return {self.value_of(self.steps[:i] + ((flipped[op], b),) + self.steps[i + 1:])
                for i, (op, b) in enumerate(self.steps) if op in flipped}

    def one_operands_swapped(self) -> set[int]:
        """Values with one subtraction's operands swapped (b - a for a - b)."""
        values = set()
        for i, (operator, operand) in enumerate(self.steps):
            if operator != "-":
                continue
            before = self.value_of(self.steps[:i])
            value = operand - before
            for later_operator, later_operand in self.steps[i + 1:]:
                value = _apply(later_operator, value, later_operand)
            values.add(value)
        return values


def chain_of(metadata: Mapping[str, Any] | None) -> Chain | None:
    """The chain an arith prompt's metadata records (`operands`, `operators`), or None when the
    metadata holds none or a malformed one (another data source: its flaws then never fire)."""
    if not metadata:
        return None
    operands, operators = metadata.get("operands"), metadata.get("operators")
    if not isinstance(operands, list | tuple) or not isinstance(operators, list | tuple):
        return None
    if len(operands) != len(operators) + 1 or not operators:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in operands):
        return None
    if not all(op in _OPERATORS for op in operators):
        return None
    return Chain(operands[0], tuple(zip(operators, operands[1:], strict=True)))
