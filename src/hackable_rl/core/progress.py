"""Progress of long loops: a rich bar in a terminal, a periodic log line anywhere else.

Under DVC, CI or `hackable-rl seeds` the output is a file or a pipe: a bar there prints nothing
useful (rich draws nothing) or hundreds of carriage-return frames (tqdm), and a minute of
evaluation looked like a hang. So when stderr is not a terminal, progress is one log line every
`PERIOD_S` seconds (`eval sampled: 256/4000 completions (6%), 12 s`) and one when the loop ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["PERIOD_S", "PeriodicProgress", "progress_bar"]

log = logging.getLogger(__name__)

PERIOD_S = 15.0  # seconds between lines when not a terminal: 4 lines a minute, a minute is never silent


class PeriodicProgress:
    """Counts work done and writes `<label>: <done>/<total> <unit> (<pct>%), <seconds> s` when at least
    `period_s` seconds passed since the last line, and once more when the count reaches the total."""

    def __init__(
        self,
        total: int,
        label: str,
        unit: str,
        period_s: float = PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
        write: Callable[[str], None] = log.info,
    ):
        self.total, self.label, self.unit = total, label, unit
        self.period_s, self._clock, self._write = period_s, clock, write
        self.done = 0
        self._started = self._last_line = clock()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self._clock()
        if self.done >= self.total or now - self._last_line >= self.period_s:
            self._last_line = now
            self._write(self.line(now))

    def line(self, now: float) -> str:
        share = 100 * self.done / self.total if self.total else 100.0
        return f"{self.label}: {self.done}/{self.total} {self.unit} ({share:.0f}%), {now - self._started:.0f} s"


def _stderr_is_terminal() -> bool:
    # deferred: rich loads only where a bar or console is drawn
    from rich.console import Console

    return Console(stderr=True).is_terminal


@contextmanager
def progress_bar(
    total: int, label: str, unit: str = "items", enabled: bool = True, lines_when_piped: bool = True
) -> Iterator[Callable[..., None]]:
    """Yields `advance(n=1)`: a transient rich bar on a terminal; otherwise `PeriodicProgress` log lines
    (or nothing, with `lines_when_piped=False`, for a loop that logs its own lines). Disabled, a no-op."""
    if not enabled:
        yield lambda n=1: None
        return
    if not _stderr_is_terminal():
        counter = PeriodicProgress(total, label, unit) if lines_when_piped else None
        yield counter.advance if counter else (lambda n=1: None)
        return
    # deferred: rich loads only where a bar or console is drawn
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n=1: progress.advance(task, n)
