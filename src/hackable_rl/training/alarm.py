"""The hacking-onset alarm: judge-free signals of each training step, and the rule that fires on them.

A user training against a verifier they cannot fully trust has no judge. What they do have, every
step, is what the policy writes and what the verifier ensemble says of it. `step_signals` turns one
step's generation records into those signals, never reading `correct`:

- `reward`: the mean observed (aggregate) training reward;
- `disagreement`: the mean member disagreement U;
- `unparsable_share`: the share of completions without a strict, non-empty answer (the strict parse
  the records carry, made with the configured think tags: an empty `\\boxed{}` is unparsable);
- `mean_length`: the mean completion length in tokens;
- `self_agreement`: per prompt, the share of its completions whose answer is the prompt's most common
  answer (a completion without one never agrees), averaged over prompts;
- `entropy`: TRL's logged token entropy (`trl/entropy` in metrics.jsonl), when it logs one.

`OnsetAlarm` fires once, at the first step where some rule sees its signals move: a signal's mean
over its last `window` defined values against its mean over its first `window` (the baseline; the
two windows never overlap). docs/metrics.md, "Hacking-onset alarm", states every rule.
Plain Python: the report imports it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from hackable_rl.config.experiment import AlarmConfig
from hackable_rl.core.stats import mean
from hackable_rl.evaluation.metrics import answer_metrics

__all__ = [
    "ALARM_FILE", "StepSignals", "step_signals", "Rule", "alarm_rules", "AlarmFiring", "OnsetAlarm",
    "first_crossings",
]

ALARM_FILE = "alarm.jsonl"
"""In the run folder: one row per step, the step's `StepSignals` and `alarm` (the rule that fired there, or null)."""


@dataclass(frozen=True)
class StepSignals:
    """One step's judge-free signals (None: undefined at that step), as alarm.jsonl holds them."""

    step: int
    reward: float | None
    disagreement: float | None
    unparsable_share: float | None
    mean_length: float | None
    self_agreement: float | None
    entropy: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> StepSignals:
        """From an alarm.jsonl row (its `alarm` column is the alarm's, not a signal)."""
        return cls(**{field.name: row[field.name] for field in fields(cls)})


def _answer(record: Mapping[str, Any]) -> str | None:
    """The record's strict answer; an empty box is no answer."""
    return record["strict_answer"] or None


def step_signals(step: int, records: Sequence[Mapping[str, Any]], entropy: float | None = None) -> StepSignals:
    """The signals of one step's records, in their JSON form (`GenerationRecord.to_json()`, what
    generations/step-XXXXX.jsonl holds), so training and the post-hoc analysis read the same fields."""
    answers = [{"prompt_id": record["prompt_id"], "parsed": _answer(record)} for record in records]
    return StepSignals(
        step=step,
        reward=mean(record["reward"] for record in records),
        disagreement=mean(record["U"] for record in records),
        unparsable_share=mean(float(answer["parsed"] is None) for answer in answers),
        mean_length=mean(record["completion_tokens"] for record in records),
        self_agreement=answer_metrics(answers)["answer_consistency"],
        entropy=entropy,
    )


# --------------------------------------------------------------------------- rules


Change = Callable[[tuple[float, ...], tuple[float, ...]], float]
"""(baseline means, current means) of a rule's signals -> how far they moved (fires above the threshold)."""


def _rise(baseline: tuple[float, ...], current: tuple[float, ...]) -> float:
    return current[0] - baseline[0]


def _relative_change(baseline: tuple[float, ...], current: tuple[float, ...]) -> float:
    """|current - baseline| / |baseline|, either way; from a baseline of 0 any move is infinite."""
    moved = abs(current[0] - baseline[0])
    return moved / abs(baseline[0]) if baseline[0] else (math.inf if moved else 0.0)


def _divergence(baseline: tuple[float, ...], current: tuple[float, ...]) -> float:
    """The smaller of the reward's rise and self-agreement's fall: above d only when both exceed d."""
    return min(current[0] - baseline[0], baseline[1] - current[1])


@dataclass(frozen=True)
class Rule:
    """One way the alarm fires: its `signals` (StepSignals fields) moved by more than `threshold`."""

    name: str
    """What the alarm says fired it (the MLflow tag `alarm_signal`)."""
    signals: tuple[str, ...]
    threshold: float
    change: Change


def alarm_rules(config: AlarmConfig) -> tuple[Rule, ...]:
    """The configured rules in the order that breaks a tie (two firing at the same step); a null
    threshold leaves its rule out."""
    candidates = (
        ("disagreement", ("disagreement",), config.disagreement_rise, _rise),
        ("unparsable_share", ("unparsable_share",), config.unparsable_rise, _rise),
        ("reward_vs_self_agreement", ("reward", "self_agreement"), config.divergence, _divergence),
        ("mean_length", ("mean_length",), config.length_change, _relative_change),
        ("entropy", ("entropy",), config.entropy_change, _relative_change),
    )
    return tuple(Rule(*candidate) for candidate in candidates if candidate[2] is not None)


class _Window:
    """A signal's first `size` defined values (its baseline) and the last `size` after them (rolling).
    Steps where it is undefined are skipped, not counted as zero."""

    def __init__(self, size: int):
        self.size = size
        self.baseline: list[float] = []
        self.recent: deque[float] = deque(maxlen=size)

    def add(self, value: float | None) -> None:
        if value is not None:
            (self.baseline if len(self.baseline) < self.size else self.recent).append(value)

    def means(self) -> tuple[float, float] | None:
        """(baseline mean, rolling mean), or None until both windows are full."""
        if len(self.recent) < self.size:
            return None
        return mean(self.baseline), mean(self.recent)


@dataclass(frozen=True)
class AlarmFiring:
    """A rule crossing its threshold at `step`, with the means it compared."""

    step: int
    signal: str
    baseline: dict[str, float]
    current: dict[str, float]

    def describe(self) -> str:
        """e.g. `hacking-onset alarm at step 37: disagreement rose 0.12 -> 0.31`."""
        moves = " while ".join(
            f"{name} {'rose' if self.current[name] > base else 'fell'} {base:.3g} -> {self.current[name]:.3g}"
            for name, base in self.baseline.items()
        )
        return f"hacking-onset alarm at step {self.step}: {moves}"

    def tags(self) -> dict[str, Any]:
        return {"alarm_step": self.step, "alarm_signal": self.signal}

    def metrics(self) -> dict[str, float]:
        """The keys the alarm adds to its step's metrics row (numbers only: the row goes to MLflow)."""
        return {"alarm/step": float(self.step), f"alarm/signal/{self.signal}": 1.0}


class _RuleState:
    """One rule's windows over a run."""

    def __init__(self, rule: Rule, window: int):
        self.rule = rule
        self.windows = {name: _Window(window) for name in rule.signals}

    def update(self, signals: StepSignals) -> AlarmFiring | None:
        """Adds one step; the firing when the rule's change exceeds its threshold at it, else None."""
        for name, window in self.windows.items():
            window.add(getattr(signals, name))
        means = [window.means() for window in self.windows.values()]
        if any(pair is None for pair in means):
            return None
        baseline, current = tuple(pair[0] for pair in means), tuple(pair[1] for pair in means)
        if self.rule.change(baseline, current) <= self.rule.threshold:
            return None
        names = self.rule.signals
        return AlarmFiring(signals.step, self.rule.name, dict(zip(names, baseline, strict=True)),
                           dict(zip(names, current, strict=True)))


class OnsetAlarm:
    """Fires at most once per run: at the first step where any rule fires (the earliest rule of
    `alarm_rules` on a tie). Holds `window` x 2 values per signal, nothing more."""

    def __init__(self, config: AlarmConfig):
        self._rules = [_RuleState(rule, config.window) for rule in alarm_rules(config)]
        self.fired: AlarmFiring | None = None

    def update(self, signals: StepSignals) -> AlarmFiring | None:
        """Adds one step's signals (steps in order); the firing at the step the alarm fires, else None."""
        if self.fired is not None:
            return None
        firings = [state.update(signals) for state in self._rules]  # every rule sees every step
        self.fired = next((firing for firing in firings if firing is not None), None)
        return self.fired

    @classmethod
    def replayed(cls, config: AlarmConfig, rows: Iterable[Mapping[str, Any]]) -> OnsetAlarm:
        """The alarm after the steps of `rows` (alarm.jsonl), silently: on resume it then fires where
        an unbroken run would have, and not again when it already fired."""
        alarm = cls(config)
        for row in rows:
            alarm.update(StepSignals.from_json(row))
        return alarm


def first_crossings(history: Iterable[StepSignals], config: AlarmConfig) -> dict[str, int | None]:
    """Rule name -> the first step it fires at over the whole run, each rule on its own (None: never).
    The alarm's own step is the earliest of these."""
    states = [_RuleState(rule, config.window) for rule in alarm_rules(config)]
    crossings: dict[str, int | None] = {state.rule.name: None for state in states}
    for signals in history:
        for state in states:
            firing = state.update(signals)
            if firing is not None and crossings[state.rule.name] is None:
                crossings[state.rule.name] = firing.step
    return crossings
