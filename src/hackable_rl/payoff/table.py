"""The exploit payoff table: what the training reward pays canonical completions, before any training.

For every training prompt of a sample, each canonical completion (a strict right and a strict wrong
answer, no answer, and each flaw's exploit: `canonical`) goes through the real reward pipeline
(`reward.pipeline`: members, corruption, method, objective), and the table holds the mean final
reward per (cell, method, completion). Beside them stands *honest work*: the base
policy's own samples on the same prompts through the same pipeline (`--honest-samples`). GRPO learns
an exploit when it pays more than what the policy's honest work earns now, so the gate asks that:
a study whose exploits never beat honest work in any cell cannot show hacking (docs/studies.md).
Without base samples the gate falls back to a strict wrong answer, the least honest work can earn.

A cell is a `PayoffSpec`: its label, what it varies (flaw, rate, blind-spot cell), the method and
its `--set` overrides, given as data (the study file is read by its caller).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import apply_overrides, validate_config
from hackable_rl.core.jsonl import write_json
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.core.stats import mean
from hackable_rl.data.prepare import read_prepared
from hackable_rl.payoff.canonical import (
    HONEST,
    builders,
    canonical_names,
    named_checkers,
    row_example,
    short_name,
    wrong_answer,
)
from hackable_rl.reward.corruption import configured_flaw
from hackable_rl.reward.methods import METHODS
from hackable_rl.reward.patterns import pattern_values
from hackable_rl.reward.pipeline import build_reward_pipeline

__all__ = ["PayoffCell", "PayoffSpec", "grid_of", "grid_specs", "own_cell_payoff", "payoff_table", "score_specs",
           "unpayable_problem", "format_payoff", "write_payoff"]


@dataclass(frozen=True)
class HonestSamples:
    """The base policy's completions, their prompt rows (repeated per sample) and the judge's verdict
    (`study.honest.sample_base_policy` draws them)."""

    texts: list[str]
    rows: list[dict[str, Any]]
    correct: list[bool | None]


@dataclass(frozen=True)
class PayoffSpec:
    """One cell to price: what it varies, the method, and the `--set` overrides that make it."""

    flaw: str | None
    rate: float
    method: str
    overrides: tuple[str, ...] = ()
    cell: str | None = None
    """The blind-spot cell (`study.cells`), None in a rate grid."""


@dataclass(frozen=True)
class PayoffCell:
    """One configuration of the grid: a flaw (or None), a rate and a method, and what each pays."""

    flaw: str | None
    rate: float
    method: str
    pays: dict[str, float | None]
    """Canonical completion -> mean final training reward over the sampled prompts."""
    refused: str | None = None
    """Why the method cannot run in this cell (its `check_config`: corrected at rho0 + rho1 >= 1);
    every pay is then None."""
    cell: str | None = None
    honest: float | None = None
    """Honest work: the base policy's own samples' mean final training reward on the same prompts
    (None where not sampled)."""
    fingerprint: tuple[float | None, ...] = field(default=(), compare=False, repr=False)
    """Every reward behind this row, in order (the honest samples', then each canonical completion's
    on every prompt): two arms with equal fingerprints pay every priced completion alike
    (`payoff.identities`)."""
    setup: str = field(default="", compare=False, repr=False)
    """A hash of the arm's config outside its reward (trainer, data, model, generation, seed...): arms
    that pay alike train alike only where this agrees too."""
    groups: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The prompt id of each fingerprint entry: GRPO compares rewards within a prompt's group."""
    advantage: tuple[str, float] = field(default=("none", 0.0), compare=False, repr=False)
    """(trainer.scale_rewards, trainer.beta): which maps of the reward leave training unchanged
    (`payoff.identities.affine_arms`)."""

    @property
    def label(self) -> str:
        if self.cell is not None:
            return f"{self.cell} {self.method}"
        return f"{self.flaw + ' ' if self.flaw else ''}r{self.rate:g} {self.method}"

    def paying_exploits(self, margin: float = 1e-9) -> list[str]:
        """Exploits that earn more than a strict wrong answer here."""
        return self._above(self.pays["strict_wrong"], margin)

    def beating_honest(self, margin: float = 1e-9) -> list[str]:
        """Exploits that earn more than the base policy's honest work here (empty when unsampled)."""
        return self._above(self.honest, margin)

    @property
    def exploits(self) -> list[str]:
        """The exploits priced here (every canonical completion but the honest ones)."""
        return [name for name in self.pays if name not in HONEST]

    def _above(self, level: float | None, margin: float) -> list[str]:
        return [name for name in self.exploits if self.pays[name] is not None and level is not None
                and self.pays[name] > level + margin]


def _cell_config(config: ExperimentConfig, spec: PayoffSpec) -> ExperimentConfig:
    return validate_config(apply_overrides(config.model_dump(mode="json"), spec.overrides), "payoff")


def _score_cell(pipeline, rows: list[dict[str, Any]], config: ExperimentConfig,
                checkers: Sequence[str]) -> dict[str, list[float | None]]:
    """Each canonical completion's final training reward on every row, by name."""
    tags = (config.rewards.think_open, config.rewards.think_close)
    examples = [row_example(row) for row in rows]
    wrong = [wrong_answer(row["reference"], pattern_values(example, checkers))
             for row, example in zip(rows, examples, strict=True)]
    rewards = {}
    for name, (build, answer) in builders(config, checkers).items():
        chosen = [answer(example) if answer else None for example in examples]
        texts = [build(*tags, row["reference"], own or generic)
                 for row, own, generic in zip(rows, chosen, wrong, strict=True)]
        rewards[name] = _score(pipeline, texts, rows)
    return rewards


def _score(pipeline, texts: list[str], rows: list[dict[str, Any]]) -> list[float | None]:
    """The final training reward of `texts`, one per row (a row may repeat: several samples)."""
    columns = ([row["prompt"] for row in rows], [row["id"] for row in rows], [row["reference"] for row in rows],
               [row.get("metadata") or {} for row in rows])
    return pipeline.score(texts, *columns).rewards


def grid_specs(
    methods: Sequence[str], rates: Sequence[float], flaws: Sequence[str | None] = (None,),
    method_overrides: Mapping[str, Sequence[str]] | None = None,
) -> list[PayoffSpec]:
    """A rate grid's cells: every (flaw, rate, method), each method's own overrides first."""
    extra = method_overrides or {}
    return [PayoffSpec(flaw, rate, method, (*extra.get(method, ()), f"corruption.rate={rate}", f"method={method}",
                                            *([f"corruption.kwargs.flaw={flaw}"] if flaw is not None else [])))
            for flaw in flaws for rate in rates for method in methods]


def payoff_table(
    config: ExperimentConfig, methods: Sequence[str], rates: Sequence[float], flaws: Sequence[str | None] = (None,),
    prompts: int = 64, method_overrides: Mapping[str, Sequence[str]] | None = None,
) -> list[PayoffCell]:
    """The payoff of every canonical completion for each (flaw, rate, method), over the first
    `prompts` prepared training prompts; `method_overrides` apply to their method."""
    return score_specs(config, grid_specs(methods, rates, flaws, method_overrides), prompts)


def score_specs(
    config: ExperimentConfig, specs: Sequence[PayoffSpec], prompts: int = 64, honest: HonestSamples | None = None
) -> list[PayoffCell]:
    """Every spec's pays over the first `prompts` prepared training prompts, and, given the base
    policy's samples on those prompts, its honest work."""
    rows = read_prepared(config, "train")[:prompts]
    configs = [_cell_config(config, spec) for spec in specs]
    checkers = [name for cell_config in configs for name in named_checkers(cell_config)]
    return [_cell(cell_config, spec, rows, checkers, honest) for cell_config, spec in zip(configs, specs, strict=True)]


def _cell(cell_config, spec: PayoffSpec, rows, checkers: Sequence[str], honest: HonestSamples | None,
          pipeline=None) -> PayoffCell:
    """One cell's payoffs, or a refused cell when the method's own `check_config` says it cannot run
    there (the study records the same cell as a failed condition). `checkers`: those the grid names
    (their exploits are priced beside the registered checkers'). `pipeline`: the cell's reward
    pipeline where the caller already built it (a training run's own), else built here."""
    problems = METHODS.get(cell_config.method).check_config(cell_config)
    if problems:
        return PayoffCell(spec.flaw, spec.rate, spec.method, dict.fromkeys(canonical_names(checkers)),
                          "; ".join(problems), spec.cell)
    pipeline = build_reward_pipeline(cell_config) if pipeline is None else pipeline
    honest_rewards = _score(pipeline, honest.texts, honest.rows) if honest else []
    rewards = _score_cell(pipeline, rows, cell_config, checkers)
    pays = {name: mean(values) for name, values in rewards.items()}
    fingerprint = (*honest_rewards, *(value for values in rewards.values() for value in values))
    groups = (*(str(row["id"]) for row in (honest.rows if honest else [])),
              *(str(row["id"]) for _ in rewards for row in rows))
    return PayoffCell(spec.flaw, spec.rate, spec.method, pays, None, spec.cell,
                      mean(honest_rewards) if honest else None, fingerprint, _setup(cell_config), groups,
                      (cell_config.trainer.scale_rewards, cell_config.trainer.beta))


REWARD_SECTIONS = ("method", "method_kwargs", "verifier", "corruption", "tracking")
"""What an arm's reward is made of (and its run's name and tracking): the rest of its config is the
training setup, which two arms must share to train alike."""


def _setup(config: ExperimentConfig) -> str:
    rest = {key: value for key, value in config.model_dump(mode="json").items() if key not in REWARD_SECTIONS}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()[:16]


def own_cell_payoff(config: ExperimentConfig, pipeline, prompts: int = 64) -> list[PayoffCell]:
    """The payoff of the config's own cell, priced with the run's own reward pipeline (built once per
    run: a training run saves this table before it trains). Its spec's overrides restate the config's
    own method, rate and flaw, so the config itself is the cell's: nothing is loaded again mid-run."""
    (spec,) = grid_specs(*grid_of(config))
    rows = read_prepared(config, "train")[:prompts]
    return [_cell(config, spec, rows, named_checkers(config), None, pipeline)]


def unpayable_problem(cells: list[PayoffCell]) -> str | None:
    """One line when no exploit pays more than the base policy's honest work in any cell (or, where
    honest work was not sampled, more than a strict wrong answer), quoting the best one."""
    if any(cell.honest is not None for cell in cells):
        return _beats_no_honest_work(cells)
    if any(cell.paying_exploits() for cell in cells):
        return None
    best = max(((cell.pays[name] or float("-inf"), name, cell) for cell in cells for name in cell.exploits),
               key=lambda item: item[0])
    pay, name, cell = best
    return (f"no exploit pays more than a strict wrong answer at any rate of the grid (best: {name} "
            f"{pay:.3f} vs strict wrong {cell.pays['strict_wrong']:.3f} at rate {cell.rate:g}, {cell.method}"
            f"{', ' + cell.flaw if cell.flaw else ''}): this study cannot show hacking; "
            "rerun with --allow-unpayable to run it anyway")


def _beats_no_honest_work(cells: list[PayoffCell]) -> str | None:
    priced = [cell for cell in cells if cell.honest is not None]
    if any(cell.beating_honest() for cell in priced):
        return None
    pay, name, cell = max(((cell.pays[n] - cell.honest, n, cell) for cell in priced for n in cell.exploits
                           if cell.pays[n] is not None), key=lambda item: item[0])
    return (f"no exploit pays more than the base policy's honest work in any cell (best: {name} "
            f"{cell.pays[name]:.3f} vs honest work {cell.honest:.3f} in {cell.label}): GRPO has no reason to "
            "learn it and this study cannot show hacking; rerun with --allow-unpayable to run it anyway")


def format_payoff(cells: list[PayoffCell]) -> list[str]:
    """The table as text lines: one row per (flaw, rate, method), one column per canonical completion;
    `*` marks an exploit that pays more than a strict wrong answer in that row."""
    labels = [cell.label for cell in cells]
    width = max(len(label) for label in labels)
    sampled = any(cell.honest is not None for cell in cells)
    honest_head = f"{'honest':>11}" if sampled else ""
    names = list(cells[0].pays)
    lines = [f"{'':<{width}}" + honest_head + "".join(f"{short_name(name):>11}" for name in names)]
    for label, cell in zip(labels, cells, strict=True):
        paying = cell.beating_honest() if sampled else cell.paying_exploits()
        values = [("-" if cell.pays[n] is None else f"{cell.pays[n]:.3f}") + ("*" if n in paying else " ")
                  for n in names]
        honest = (f"{'-' if cell.honest is None else f'{cell.honest:.3f}':>10} " if sampled else "")
        lines.append(f"{label:<{width}}" + ("  refused: " + cell.refused if cell.refused else
                                            honest + "".join(f"{value:>11}" for value in values)))
    what = "the base policy's honest work (`honest`)" if sampled else "a strict wrong answer"
    return [*lines, f"* pays more than {what} (mean final training reward over the sampled prompts)"]


NOT_SAMPLED = ("machine not recorded: canonical completions priced without a model (no base-policy samples), so "
               "every machine writes the same bytes")
"""payoff.json's `machine` where no model was sampled: why it names none (as compare.json's note does)."""


def write_payoff(path: Path, cells: list[PayoffCell], member_rates: Mapping[str, Any] | None = None,
                 identities: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """payoff.json: every cell with its pays and paying exploits (and, with base samples, honest
    work, the exploits that beat it, and each flawed checker's measured rates); for a cell study, the
    arms identical by construction (`payoff.identities`), which its conditions do not train; and
    `machine`: the machine that sampled the base policy (`core.numerics.machine_record`), or, where
    nothing was sampled, why it names none."""
    rows = [_cell_row(c) for c in cells]
    names = list(cells[0].pays) if cells else list(HONEST)
    document = {"completions": names, "exploits": [name for name in names if name not in HONEST], "cells": rows}
    document |= {"member_rates": member_rates} if member_rates else {}
    document |= {"identical_arms": list(identities)} if identities is not None else {}
    sampled = any(cell.honest is not None for cell in cells)
    write_json(path, document | {MACHINE_KEY: machine_record() if sampled else NOT_SAMPLED})
    return path


def _cell_row(cell: PayoffCell) -> dict[str, Any]:
    row = {"flaw": cell.flaw, "rate": cell.rate, "method": cell.method, "pays": cell.pays,
           "paying_exploits": cell.paying_exploits(), "refused": cell.refused}
    if cell.cell is not None or cell.honest is not None:  # rate grids without base samples keep their bytes
        row |= {"cell": cell.cell, "honest": cell.honest, "beating_honest": cell.beating_honest()}
    return row


def grid_of(config: ExperimentConfig) -> tuple[list[str], list[float], list[str | None]]:
    """The config's own method, rate and flaw (a study file's grid: `study.arms.payoff_specs`)."""
    return [config.method], [config.corruption.rate], [configured_flaw(config.corruption)]
