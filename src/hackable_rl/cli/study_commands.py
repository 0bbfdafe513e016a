"""The study commands of `hackable-rl`: `payoff` (the payoff table and the arms identical by
construction, before anything trains) and `condition` (one cell x method x seed of a study). `cli` registers
them on its app; each loads the config and calls one function, as every command there does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hackable_rl.cli.errors import fail
from hackable_rl.cli.options import ConfigOption, ResumeMode, SetOption
from hackable_rl.cli.options import command_config as _config
from hackable_rl.cli.options import model_config as _model_config
from hackable_rl.core.storage import check_output_path


def check_study(study: Path, config: Any = None) -> None:
    """The study file's declarations and grid, or one line per problem (exit 2); under `config`, a real
    model's estimated wall time against the study's `budget_hours`."""
    from hackable_rl.config.study import load_study_declaration
    from hackable_rl.study.arms import payoff_specs
    from hackable_rl.study.budget import study_cost

    declared = load_study_declaration(study)
    payoff_specs(study)  # the grid must be one the payoff stage can price
    trained = declared.trained_arms() if declared.cells else len(payoff_specs(study))
    cost = study_cost(config, len(declared.seeds), trained) if config is not None else None
    if cost is not None and declared.budget_hours is not None and cost.hours > declared.budget_hours:
        fail(f"{study}: budget_hours {declared.budget_hours:g}: these settings need {cost.describe()}; "
             "lower trainer.max_steps, the completion budget, evaluation.max_prompts or the seeds, or raise the budget")
    estimate = f"; estimated {cost.describe()}" if cost is not None else ""
    typer.secho(f"# {study}: valid ({trained} trained arms, {len(declared.seeds)} replicates, "
                f"family {', '.join(declared.family)}{estimate})", err=True, fg=typer.colors.GREEN)


def payoff(
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    study: Annotated[Path | None, typer.Option("--study", help="Study file: its methods and cells or rates.")] = None,
    prompts: Annotated[int, typer.Option(min=1, help="Training prompts sampled.")] = 64,
    honest_samples: Annotated[int, typer.Option(min=0, help="Base-policy samples per prompt (honest work).")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Where payoff.json goes.")] = None,
    affine_out: Annotated[Path | None, typer.Option(
        "--affine-out", help="Where the arms found affine to another (JSON list) go.")] = None,
    allow_unpayable: Annotated[bool, typer.Option(help="Exit 0 even when no exploit pays.")] = False,
) -> None:
    """The exploit payoff table: mean training reward of canonical completions per cell and method
    beside the base policy's honest work (docs/studies.md); exit 2 when no exploit pays more anywhere."""
    from hackable_rl.core.jsonl import write_json
    from hackable_rl.payoff import table
    from hackable_rl.study.arms import study_affine_arms, study_identities, study_payoff

    if study is not None:
        check_study(study)
    cells, rates = study_payoff(_config(config, overrides), study, prompts, honest_samples)
    typer.echo("\n".join(table.format_payoff(cells)))
    identities = study_identities(study, cells) if study is not None else None
    for identity in identities or []:
        typer.echo(f"identical by construction: {identity.arm} = {identity.same_as} "
                   f"(same reward on all {identity.completions} priced completions): trained once")
    affine = study_affine_arms(study, cells) if study is not None else []
    for twin in affine:
        typer.echo(f"affine to another arm: {twin.arm} ~ {twin.same_as} (its rewards are {twin.same_as}'s under "
                   f"{twin.relation}, on all {twin.completions} priced completions): trained, never tested against it")
    if out is not None:
        found = None if identities is None else [identity.as_json() for identity in identities]
        typer.echo(f"written to {table.write_payoff(out, cells, rates, found)}")
    if affine_out is not None:
        typer.echo(f"written to {write_json(affine_out, [twin.as_json() for twin in affine])}")
    problem = table.unpayable_problem(cells)
    if problem and not allow_unpayable:
        fail(problem)


def condition(
    method: Annotated[str, typer.Option("--method", help="base (no RL), a registered method or a method variant of the study file.")],
    out: Annotated[Path, typer.Option("--out", help="Folder that receives condition.json.")],
    study: Annotated[Path | None, typer.Option("--study", help="Study file: method_overrides, cells.")] = None,
    cell: Annotated[str | None, typer.Option("--cell", help="The study file's blind-spot cell to train against.")] = None,
    payoff: Annotated[
        Path | None,
        typer.Option("--payoff", help="The study's payoff.json: an arm it lists as identical to another is not trained."),
    ] = None,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    pilots: Annotated[Path | None, typer.Option(
        "--pilots", help="Pilots file: its shared overrides (validation) and, with --setting, one of its grid's.")] = None,
    setting: Annotated[str | None, typer.Option(
        "--setting", help="A setting of the pilots file's grid (none with --method base: the pilots' base).")] = None,
    resume: Annotated[ResumeMode, typer.Option(envvar="HACKABLE_RL_RESUME", help="auto: continue the training run from "
                      "its last resumable checkpoint, if any (lanes sets it for a retried cell).")] = ResumeMode.never,
) -> None:
    """Run one study condition (train + evaluate, or evaluate the base) and write condition.json.
    A failed run is recorded there (status failed, its error) and exits 0, so a sweep goes on."""
    from hackable_rl.study.cells import study_condition
    from hackable_rl.study.condition import identical_twin, record_identical, run_condition

    if cell and not study:
        fail("condition: --cell needs --study (the file that declares the cells)")
    if setting and not pilots:
        fail("condition: --setting needs --pilots (the file that declares the grid)")
    extra, spot, variant = study_condition(study, method, cell) if study else ([], None, False)
    if pilots is not None:
        from hackable_rl.config.pilots import pilot_overrides

        extra = [*extra, *pilot_overrides(pilots, setting)]
    cfg = _model_config(config, [*extra, *(overrides or [])], refusals=False)  # a refused cell is recorded
    check_output_path(out, "--out", folder=True)
    twin = identical_twin(payoff, cell, method) if payoff is not None and spot is not None else None
    if twin is not None:
        record = record_identical(cfg, method, out, spot, twin, variant)
        typer.echo(f"condition {record['condition']['name']}: identical by construction to {twin['cell']} "
                   f"{twin['method']} (payoff samples); not trained, reads {record['identical_to']['folder']}")
        return
    record = run_condition(cfg, method, out, spot, variant, resume.value)
    name = record["condition"]["name"]
    if record["status"] == "ok":
        typer.echo(f"condition {name}: ok, pass@1 {record['eval'].get('pass_at_1')}, gap {record['eval'].get('hacking_gap')}")
    else:
        typer.secho(f"condition {name}: FAILED ({record['error']}); recorded in {out}", err=True, fg=typer.colors.RED)


def pilots(
    pilots_file: Annotated[Path, typer.Option("--pilots", help="The pilots file (its grid, seeds and rule).")],
    folder: Annotated[Path, typer.Option("--folder", help="Where the pilots' condition folders are.")] = Path("pilots"),
    out: Annotated[Path, typer.Option("--out", help="Where summary.csv and curves.png go.")] = Path("reports/pilots"),
) -> None:
    """The pilots' learning curves on validation (gain over the warm start at each checkpoint, greedy,
    training correctness, entropy, cost) and the pilots file's rule applied to them."""
    from hackable_rl.config.pilots import load_pilots
    from hackable_rl.report.pilots import confirmations, write_pilot_summary

    declared = load_pilots(pilots_file)
    check_output_path(out, "--out", folder=True)
    points, choice, confirm = write_pilot_summary(declared, folder, out)
    for point in [*points, *confirm]:
        typer.echo(f"{point.setting} s{point.seed} step {point.step}: pass@1 {point.pass_at_1:.3f}, gain "
                   f"{point.gain:+.3f} ± {point.gain_se:.3f}, greedy {_signed(point.greedy_change)}"
                   f"{'' if point.greedy_se is None else f' ± {point.greedy_se:.3f}'}, "
                   f"{point.seconds_per_step:.1f} s a step")
    pending = [f"{s}-s{seed}" for s in declared.grid for seed in declared.pilot_seeds
               if not (folder / f"{s}-s{seed}" / "condition.json").is_file()]
    typer.echo(f"rule: waiting for {', '.join(pending)}" if pending else f"rule: {choice.describe()}")
    for confirmation in confirmations(choice, confirm, declared.confirm_seeds):
        typer.echo(confirmation.describe())
    if declared.chosen is not None and choice.point is not None and declared.chosen != choice.point.setting:
        typer.secho(f"note: {pilots_file} declares chosen: {declared.chosen}, the rule chooses {choice.point.setting}",
                    err=True, fg=typer.colors.YELLOW)
    typer.echo(f"written to {out / 'summary.csv'}")


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"
