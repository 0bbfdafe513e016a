"""A study's arms, priced before they train: its cells and methods as payoff specs (`payoff_specs`),
the payoff table of them with the base policy's honest work and each flaw's measured rates
(`study_payoff`), and the arms that train alike: identical by construction (`study_identities`),
affine to another by the payoff stage's prices (`study_affine_arms`) or by their method's own
declaration (`affine_twins`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import load_config
from hackable_rl.config.study import load_study
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import METHODS
from hackable_rl.data.prepare import read_prepared
from hackable_rl.payoff.identities import Identity, affine_arms, identical_arms
from hackable_rl.payoff.table import PayoffCell, PayoffSpec, grid_of, grid_specs, score_specs
from hackable_rl.reward.checkers import CheckerOptions
from hackable_rl.study.cells import (
    Cell,
    cell_overrides,
    method_overrides,
    read_cell,
    study_cells,
    study_condition,
    variant_method,
)
from hackable_rl.study.honest import measured_rates, sample_base_policy

__all__ = ["affine_twins", "payoff_specs", "study_affine_arms", "study_checkers", "study_identities", "study_payoff"]


def payoff_specs(study_file: Path) -> list[PayoffSpec]:
    """The cells a study file trains, as payoff specs: every blind-spot cell with every trained
    method (the cell's members, then the method's overrides), or the rate grid's cells."""
    study = load_study(study_file)
    methods = study.trained_methods()
    cells = study_cells(study_file)
    if not methods or not (cells or study.rates):
        raise UserError(f"{study_file}: expected `methods` and `cells` or `rates` lists (the study grid)")
    overrides = {method: method_overrides(study_file, method) for method in methods}
    if not cells:
        return grid_specs(methods, [float(r) for r in study.rates], list(study.flaws or [None]), overrides)
    specs = []
    for name in cells:
        cell = read_cell(study_file, name)
        for method in methods:
            own = overrides[method] if variant_method(overrides[method]) else [*overrides[method], f"method={method}"]
            specs.append(PayoffSpec(cell.exploited_flaw, 0.0, method, (*cell_overrides(cell), *own), name))
    return specs


def study_payoff(
    config: ExperimentConfig, study_file: Path | None, prompts: int, honest_samples: int
) -> tuple[list[PayoffCell], dict[str, Any]]:
    """The payoff table of a study file's cells (or of the config's own cell), with honest work and
    the measured rates of every flawed checker when `honest_samples` base samples per prompt are drawn."""
    specs = payoff_specs(study_file) if study_file else grid_specs(*grid_of(config))
    if not honest_samples:
        return score_specs(config, specs, prompts), {}
    samples = sample_base_policy(config, read_prepared(config, "train")[:prompts], honest_samples)
    checkers = study_checkers(study_file) if study_file else []
    rates = measured_rates(samples, checkers, CheckerOptions.from_config(config)) if checkers else {}
    return score_specs(config, specs, prompts, samples), rates


def affine_twins(study_file: Path, params: Path) -> set[tuple[str, str, str]]:
    """(cell, method, twin) for every trained arm whose optimised reward is, by its method's own
    declaration (`MethodSpec.affine_to`), a positive affine map of another of the cell's methods':
    the arm trains as its twin does, and the report never tests one against the other."""
    study = load_study(study_file)
    methods = study.trained_methods()
    twins = set()
    for cell in study.cells:
        for method in methods:
            if method in study.method_cells and cell not in study.method_cells[method]:
                continue
            overrides, _, _ = study_condition(study_file, method, cell)
            config = load_config(params, overrides)
            twin = METHODS.get(config.method).affine_to(config)
            if twin is not None and twin != method and twin in methods:
                twins.add((cell, method, twin))
    return twins


def study_identities(study_file: Path, cells: list[PayoffCell]) -> list[Identity]:
    """The study's arms identical by construction (none for a rate grid), representatives chosen by
    the order of the study's `methods`."""
    return identical_arms(cells, load_study(study_file).trained_methods())


def study_affine_arms(study_file: Path, cells: list[PayoffCell]) -> list[Identity]:
    """The study's arms whose priced rewards differ from another arm's of their cell only by a map
    GRPO's advantages and Adam's step do not see (`payoff.identities.affine_arms`)."""
    return affine_arms(cells, load_study(study_file).trained_methods())


def study_checkers(study_file: Path) -> list[str]:
    """Every flawed checker the study's cells hold (the payoff stage measures each one's rates)."""
    cells = [read_cell(study_file, name) for name in study_cells(study_file)]
    return [c for cell in cells if isinstance(cell, Cell) for c in cell.checkers if c != "clean"]
