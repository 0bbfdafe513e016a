"""The judge monitor's windowed test applied to a judge-free signal (docs/metrics.md, "Hacking-onset alarm").

At each step from the `2 * window`-th defined value on: the mean of the last `window` values minus the
mean of the first `window` (the signal's start), over the standard error of that difference (each
sd floored at the signal's `sd_floor`, so a share that sat at exactly 0 is not infinitely surprised
by one sample), signed so that a move in the signal's warning direction is positive (`both`: its
absolute value). The same shape as the judge's onset test (`alarm.onset`), on one signal.
`WindowDetector` runs it live, a step at a time; `window_statistics` over a whole series. Plain Python.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["window_statistics", "WindowDetector"]


def _z(first: Sequence[float], last: Sequence[float], sd_floor: float, direction: str) -> float:
    window = len(first)
    spread = max(statistics.variance(first), sd_floor ** 2) / window + max(statistics.variance(last), sd_floor ** 2) / window
    z = (statistics.fmean(last) - statistics.fmean(first)) / math.sqrt(spread)
    return {"up": z, "down": -z}.get(direction, abs(z))


def window_statistics(values: Sequence[tuple[int, float]], window: int, sd_floor: float,
                      direction: str) -> list[tuple[int, float]]:
    """(step, z) for each step from the `2 * window`-th defined value on. It reads no value after its step."""
    if len(values) < 2 * window:
        return []
    first = [value for _, value in values[:window]]
    return [(values[end - 1][0], _z(first, [value for _, value in values[end - window : end]], sd_floor, direction))
            for end in range(2 * window, len(values) + 1)]


class WindowDetector:
    """The windowed test on one signal, live: `update` adds a step's value and says whether z has
    just crossed `threshold` for the first time."""

    def __init__(self, name: str, window: int, sd_floor: float, direction: str, threshold: float):
        self.name, self.window, self.sd_floor, self.direction, self.threshold = name, window, sd_floor, direction, threshold
        self.values: list[float] = []
        self.statistic: float | None = None
        self.crossed_at: int | None = None

    def update(self, step: int, value: float | None) -> bool:
        if value is None:
            return False
        self.values.append(value)
        if len(self.values) < 2 * self.window:
            return False
        self.statistic = _z(self.values[: self.window], self.values[-self.window :], self.sd_floor, self.direction)
        if self.crossed_at is None and self.statistic > self.threshold:
            self.crossed_at = step
            return True
        return False

    def describe(self) -> str:
        """e.g. `unparsable_share moved (window z 4.3 > 4; last 10 mean 0.21, first 10 mean 0.02)`."""
        way = {"up": "rose", "down": "fell"}.get(self.direction, "moved")
        return (f"{self.name} {way} (window z {self.statistic:.3g} > {self.threshold:g}; last {self.window} mean "
                f"{statistics.fmean(self.values[-self.window:]):.3g}, first {self.window} mean "
                f"{statistics.fmean(self.values[: self.window]):.3g})")
