"""Which per-step series go to MLflow's charts: a flat line is a tag, not a chart.

Some diagnostics are constant by construction in a configuration: TRL's clip ratios (0 when every
step is on-policy), its loss (0 for GRPO's on-policy loss without a KL term), and the ensemble's
disagreement, missing and suppressed counts for a one-member verifier. Drawn as charts they bury the
curves that move. So a diagnostic series (`trl/*`, `verifier/*`) stays out of MLflow while every
point so far has had one value; the run gets the tag `constant.<key>` with that value when training
ends. The first time it takes a second value, its points so far are sent with the new one (from
metrics.jsonl, the source of truth), and from then on it is a chart like the others.

The measurements a person compares (`judge/`, `reward/`, the hacking gap, format, length) are always
charts: a flat one there is a finding. metrics.jsonl keeps every series of every step either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

DIAGNOSTIC_PREFIXES = ("trl/", "verifier/")
CONSTANT_TAG_PREFIX = "constant."

Point = tuple[int, dict[str, Any]]  # (step, {key: value})


def is_diagnostic(key: str) -> bool:
    """A series that may be flat by construction, and is kept out of the charts while it is."""
    return key.startswith(DIAGNOSTIC_PREFIXES)


class ConstantSeries:
    """Splits the rows a flush sends into what MLflow charts; remembers the series it released."""

    def __init__(self, released: Iterable[str] = ()):
        self.released = set(released)  # diagnostic keys that have varied: charted from then on

    def points_to_send(self, pending: list[Point], history: list[dict[str, Any]]) -> list[Point]:
        """`pending` (step order) without the diagnostic keys that are still constant, plus, for one
        that takes a second value in it, its earlier points (`history`: metrics.jsonl's rows)."""
        if not pending:
            return []
        first = pending[0][0]
        seen = {key: _values(history, key, before=first) for key in _diagnostic_keys(pending, self.released)}
        sent: list[Point] = []
        for step, row in pending:
            kept = {}
            for key, value in row.items():
                if not is_diagnostic(key) or key in self.released or not _finite(value):
                    kept[key] = value
                    continue
                seen[key].add(value)
                if len(seen[key]) > 1:  # its first change: the points it had so far go out with it
                    self.released.add(key)
                    sent += [(earlier, {key: old}) for earlier, old in _points(history, key, before=step)]
                    kept[key] = value
            sent.append((step, kept))
        return sent


def constant_tags(history: list[dict[str, Any]], released: set[str]) -> dict[str, Any]:
    """`constant.<key>` -> value for each diagnostic series that never changed value in `history`."""
    tags = {}
    for key in sorted({key for row in history for key in row if is_diagnostic(key)} - released):
        values = {row[key] for row in history if _finite(row.get(key))}
        if len(values) == 1:
            tags[CONSTANT_TAG_PREFIX + key] = values.pop()
    return tags


def released_in(events: list[dict[str, Any]]) -> set[str]:
    """Diagnostic keys a run's event log shows sent as metrics: released before a restart."""
    return {key for e in events if e["event"] == "metrics" for key in e.get("data", {}) if is_diagnostic(key)}


def _diagnostic_keys(pending: list[Point], released: set[str]) -> set[str]:
    return {key for _, row in pending for key in row if is_diagnostic(key) and key not in released}


def _values(history: list[dict[str, Any]], key: str, before: int) -> set[Any]:
    return {value for _, value in _points(history, key, before)}


def _points(history: list[dict[str, Any]], key: str, before: int) -> list[tuple[int, Any]]:
    return [(row["step"], row[key]) for row in history if row["step"] < before and _finite(row.get(key))]


def _finite(value: Any) -> bool:
    """A number MLflow stores (the tracker leaves out None and NaN): only these make a series vary."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
