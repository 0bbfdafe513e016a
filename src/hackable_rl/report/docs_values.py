"""The values a docs block restates: a committed result file, a path into it, a format (docs/results.md,
"How the numbers here are made").

A source is a committed JSON file (outcomes.json, compare.json, alarm_bench.json, summary.json,
vs_grpo.json, payoff.json, warmstart.json, ...) or a CSV file (summary.csv: one dict per row, numbers
read as numbers); a pattern with `*` (metrics/base/s*/eval.json) reads every matching file, in path
order, and a path then applies to each. A path walks into it, segment by segment, separated by dots:

    clean_vs_base.diff                               a key, then a key
    [name=pattern_share_rises,cell=k3].p_holm        the one list entry whose fields match, then a key
    [cell=k1,method=baseline]*.pass_at_1             every matching entry (one or more), then each one's key
    rules.[0].held_out.on_time                       a list index
    ceilings.*.on_time                               every value of a mapping, then each one's key

A format turns the value into text: a Python format spec (`.3f`, `+.3f`, `.0%`, `d`), a named one
(`ci`: `+0.135 [+0.102, +0.168]`; `p`: a p-value; `holm`: `Holm p 0.113, amended 0.041`, or
`raw p ...` outside the family; `cip`: both; `reading`: the words docs/metrics.md gives a comparison), optionally after list operations (`mean`, `min`, `max`, `sum`, `count`, `first`); a
list is formatted element by element, joined by ", ". No format: 3 decimals for a float.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.evaluation.replicates import minimum_detectable_effect

__all__ = ["Sources", "format_value", "reading", "resolve"]

_SEGMENT = re.compile(r"\[[^\]]*\]\*?|[^.\[]+")


class _Many(list):
    """The entries a `[...]*` segment selected: later segments apply to each."""


class Sources:
    """Committed result files read once each, relative to the repository root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._read: dict[str, Any] = {}

    def load(self, name: str) -> Any:
        """The file's content; for a pattern with `*` (metrics/base/s*/eval.json), every matching file's,
        in path order, as one selection later path segments apply to each of."""
        if name not in self._read:
            if "*" not in name:
                self._read[name] = _read_source(self.root, name)
            else:
                found = sorted(path.relative_to(self.root).as_posix() for path in self.root.glob(name))
                if not found:
                    raise UserError(f"{name}: no file matches")
                self._read[name] = _Many(_read_source(self.root, each) for each in found)
        return self._read[name]


def _read_source(root: Path, name: str) -> Any:
    path = root / name
    if not path.is_file():
        raise UserError(f"{name}: no such file")
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".csv":
        with path.open(newline="") as handle:
            return [{key: _number(value) for key, value in row.items()} for row in csv.DictReader(handle)]
    raise UserError(f"{name}: a source is a .json or .csv file")


def _number(text: str) -> Any:
    """A CSV cell as JSON would hold it: a number where it reads as one, None where empty."""
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text else value


def resolve(document: Any, path: str) -> Any:
    """The value at `path` (module docstring); a KeyError naming the segment that does not exist."""
    value = document
    for segment in _SEGMENT.findall(path.strip(".")) if path else []:
        value = _step(value, segment.strip("."))
    return value


def _step(value: Any, segment: str) -> Any:
    if isinstance(value, _Many):
        return _Many(_step(item, segment) for item in value)
    if segment == "*" and isinstance(value, Mapping):
        return _Many(value.values())
    if segment.startswith("["):
        return _select(value, segment)
    if isinstance(value, Mapping) and segment in value:
        return value[segment]
    raise KeyError(segment)


def _select(value: Any, segment: str) -> Any:
    body, many = segment.rstrip("*")[1:-1], segment.endswith("*")
    if not isinstance(value, list):
        raise KeyError(segment)
    if body.lstrip("-").isdigit():
        index = int(body)
        if not -len(value) <= index < len(value):
            raise KeyError(segment)
        return value[index]
    wanted = [part.split("=", 1) for part in body.split(",") if part]
    if any(len(pair) != 2 for pair in wanted):
        raise KeyError(f"{segment} (a filter is [field=value,...])")
    found = [item for item in value if isinstance(item, Mapping)
             and all(key in item and _matches(item[key], text) for key, text in wanted)]
    if not found or (len(found) > 1 and not many):
        raise KeyError(f"{segment} ({len(found)} entries match{'; add a field, or * for all' if found else ''})")
    return _Many(found) if many else found[0]


def _matches(value: Any, text: str) -> bool:
    if value is None or isinstance(value, bool):
        return json.dumps(value) == text
    if isinstance(value, int | float):
        try:
            return float(text) == value
        except ValueError:
            return False
    return str(value) == text


_OPERATIONS: dict[str, Callable[[list], Any]] = {
    "mean": lambda values: math.fsum(values) / len(values) if values else None,
    "min": lambda values: min(values) if values else None,
    "max": lambda values: max(values) if values else None,
    "sum": lambda values: sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values),
    "count": len,
    "first": lambda values: values[0] if values else None,
}


def format_value(value: Any, spec: str = "") -> str:
    """`value` as text under `spec`: list operations first (`mean .3f`), then one format (module docstring)."""
    words = spec.split()
    while words and words[0] in _OPERATIONS:
        if not isinstance(value, list):
            raise ValueError(f"{words[0]} needs a list (a [..]* path)")
        value = _OPERATIONS[words.pop(0)]([item for item in value if item is not None])
    if len(words) > 1:
        raise ValueError(f"unknown operation {words[0]!r} (one of {', '.join(_OPERATIONS)})")
    last = words[0] if words else ""
    if isinstance(value, list) and last not in _NAMED:
        return ", ".join(_one(item, last) for item in value)
    return _one(value, last)


def _one(value: Any, spec: str) -> str:
    if spec in _NAMED:
        return _NAMED[spec](value)
    if value is None:
        return "-"
    if isinstance(value, str) or (isinstance(value, bool) and not spec):
        return str(value)
    if not spec:
        return str(value) if isinstance(value, int) else f"{value:.3f}"
    return format(value, spec)


def _ci(entry: Any) -> str:
    """`+0.135 [+0.102, +0.168]` from an entry with diff, ci_low and ci_high (a pilot: no interval)."""
    if not isinstance(entry, Mapping) or "diff" not in entry:
        raise ValueError("ci needs an entry with diff, ci_low and ci_high")
    if entry["diff"] is None:
        return "-"
    if entry.get("ci_low") is None:
        return f"{entry['diff']:+.3f} (one replicate: no interval)"
    return f"{entry['diff']:+.3f} [{entry['ci_low']:+.3f}, {entry['ci_high']:+.3f}]"


def _p(value: Any) -> str:
    """A p-value: `< 0.001` below it, else three decimals (`0.019`, `0.113`, `1.000`)."""
    if value is None:
        return "-"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _holm(entry: Any) -> str:
    """`Holm p 0.113, amended 0.041`: the declared family's p, the amended family's beside it where a
    deviation gives another; `raw p 0.003` for a comparison outside the family."""
    if not isinstance(entry, Mapping) or "p_value" not in entry:
        raise ValueError("holm needs a comparison entry with p_value (and p_holm)")
    if entry.get("p_holm") is None:
        return f"raw p {_p(entry['p_value'])}"
    declared, amended = _p(entry["p_holm"]), _p(entry.get("p_holm_amended"))
    beside = f", amended {amended}" if entry.get("p_holm_amended") is not None and amended != declared else ""
    return f"Holm p {declared}{beside}"


def _mde(entry: Mapping[str, Any]) -> float | None:
    if entry.get("mde") is not None:
        return entry["mde"]
    return minimum_detectable_effect(entry["per_replicate"]) if entry.get("per_replicate") else None


def reading(entry: Any) -> str:
    """The words docs/metrics.md gives a comparison ("Words that match the statistics"), from its entry in
    outcomes.json, vs_grpo.json or compare.json."""
    if not isinstance(entry, Mapping) or "diff" not in entry:
        raise ValueError("reading needs a comparison entry (diff, ci_low, ci_high, ...)")
    if entry.get("affine"):
        return "an affine twin: listed, not tested" if not entry.get("affine_after_data") else _tested(entry)
    if entry["per_replicate"] and all(value == 0 for value in entry["per_replicate"]):
        return "identical by construction: listed, not tested"
    equivalence = entry.get("equivalence") or entry.get("verdict") or ""
    if equivalence.startswith("equivalent"):
        return f"equivalent within {equivalence.rsplit('inside ', 1)[-1]}" if "inside" in equivalence else equivalence
    return _tested(entry)


def _tested(entry: Mapping[str, Any]) -> str:
    if entry["diff"] is None or entry.get("ci_low") is None:
        return "no interval (one replicate)"
    covers_zero = entry["ci_low"] <= 0 <= entry["ci_high"]
    met = entry.get("met", not covers_zero)
    after = entry.get("met_after_holm")
    if "met" not in entry and entry.get("p_holm") is not None:
        after = entry["p_holm"] < 0.05 and not covers_zero
    if met and after:
        return "detected after Holm"
    if met:
        return "detected raw only"
    if covers_zero:
        mde = _mde(entry)
        return "no difference detected" + (f" (could have seen ±{mde:.3f})" if mde is not None else "")
    return "target not met: the difference lies the other way"


_NAMED: dict[str, Callable[[Any], str]] = {
    "ci": _ci, "p": _p, "holm": _holm, "cip": lambda entry: f"{_ci(entry)}, {_holm(entry)}", "reading": reading}
