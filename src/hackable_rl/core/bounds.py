"""The bounds a number may take, each defined once: config fields and extension settings share them.

Every float bound refuses infinity and NaN (`allow_inf_nan=False`): YAML's `.inf` passes every
`ge=0` check, and a channel's `fp_scale: inf` would pay every wrong answer in a run named clean.
Out-of-range values fail with one line in the project's words (`1.4 is not in [0, 1]`).
This module is the bottom floor: it imports only pydantic.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt

__all__ = [
    "COUNT_MAX",
    "FiniteFloat",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveInt",
    "Probability",
    "Seed",
    "Temperature",
    "ThreadCount",
    "TimeoutSeconds",
    "UnitFloat",
    "at_least",
    "bounded",
    "in_range",
]


def in_range(low: float, high: float) -> AfterValidator:
    """A validator that keeps a number inside [low, high] and says so in the project's words."""

    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"{value!r} is not in [{low:g}, {high:g}]")
        return value

    return AfterValidator(check)


def at_least(low: float) -> AfterValidator:
    """A validator that refuses a number below `low`."""

    def check(value: float) -> float:
        if value < low:
            raise ValueError(f"{value!r} is below the minimum {low:g}")
        return value

    return AfterValidator(check)


_FINITE = Field(allow_inf_nan=False)

FiniteFloat = Annotated[float, _FINITE]
"""Any float but inf, -inf and NaN."""
Probability = Annotated[float, _FINITE, in_range(0.0, 1.0)]
"""A float in [0, 1]."""
NonNegativeFloat = Annotated[float, _FINITE, at_least(0.0)]
"""A finite float >= 0."""
COUNT_MAX = 2**31 - 1
"""The largest count a field takes: torch and NumPy index with 32-bit signed integers on some paths, so
a larger step count, batch or size would end deep inside them (or in a hang allocating for it)."""


def _count_at_most(value: int) -> int:
    if value > COUNT_MAX:
        raise ValueError(f"{value} is more than {COUNT_MAX:,} (2**31 - 1, the largest count torch and NumPy index)")
    return value


PositiveInt = Annotated[int, at_least(1), AfterValidator(_count_at_most)]
"""A count of at least 1 and at most COUNT_MAX."""
NonNegativeInt = Annotated[int, at_least(0), AfterValidator(_count_at_most)]
"""A count of at least 0 and at most COUNT_MAX."""

THREADS_MAX = 1024
ThreadCount = Annotated[int, in_range(1, THREADS_MAX)]
"""Threads (or processes) for one machine: 1 to 1,024, more than the cores of any machine this runs on;
torch asked for millions of threads allocates for them and hangs."""

SEED_MAX = 2**32 - 1


def _seed_range(value: int) -> int:
    # NumPy's seeds are 32-bit: a negative seed or one past 2**32 - 1 validates as an int, then ends
    # `train` in a traceback when the seed reaches NumPy.
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"{value} is not in [0, {SEED_MAX}] (seeds are unsigned 32-bit integers)")
    return value


Seed = Annotated[StrictInt, AfterValidator(_seed_range)]
"""A random seed: an integer in [0, 2**32 - 1] (true or 1.5 are not seeds)."""


def bounded(low: float, high: float) -> object:
    """A finite float in [low, high] (a learning rate, a temperature, a timeout)."""
    return Annotated[float, _FINITE, in_range(low, high)]


Temperature = bounded(0.0, 10.0)
"""A sampling temperature: a finite float in [0, 10]."""
UnitFloat = Probability
"""A learning rate, a top_p or a tolerance: a finite float in [0, 1]."""
TimeoutSeconds = bounded(0.01, 600.0)
"""A per-call timeout in seconds: a finite float in [0.01, 600]."""
