"""One plugin per extension point, loaded as `extension_plugin:<name>` with nothing edited in src/:
a checker, a corruption channel with its own settings, a method and a report metric."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hackable_rl.answers import extract_last_number, parse_reference
from hackable_rl.verifiers import Verdict


def last_number_checker(completion, example, options=None):
    """Accepts any completion whose last number is the reference (a lenient, exploitable checker)."""
    last, target = extract_last_number(completion), parse_reference(example.reference)
    accepted = last is not None and last == target
    return Verdict(1.0 if accepted else 0.0, 1.0, last, "last_number:" + ("match" if accepted else "no_match"))


@dataclass(frozen=True)
class Stubborn:
    """With probability p the member answers `value`, whatever it saw."""

    p: float
    value: float

    def apply(self, verdict, u, v, completion, example):
        if u >= self.p:
            return verdict
        return Verdict(self.value, verdict.confidence, verdict.parsed, f"stubborn:{verdict.reason}")


def stubborn(rate: float, options, value: float = 1.0) -> Stubborn:
    """The channel factory: `corruption.kwargs.value` is this channel's own setting."""
    return Stubborn(rate, value)


def half_penalty(ensemble, config) -> np.ndarray:
    """A method: the aggregate minus half the members' disagreement U."""
    return ensemble.aggregate - 0.5 * ensemble.spread.u


def boxed_share(records) -> float | None:
    """A report metric: share of evaluated samples that box an answer."""
    return sum("\\boxed{" in r["completion"] for r in records) / len(records) if records else None
