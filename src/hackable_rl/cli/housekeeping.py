"""The commands of `hackable-rl` beside the path of one run: running a command once per seed side by
side (`seeds`) or a study's DVC stages as Ray tasks (`lanes`), and MLflow housekeeping (`sync` what an
offline run logged, `promote` an evaluated checkpoint, serve the `ui`), and the docs' generated result
blocks rendered again from the committed files (`docs-blocks`). `cli.app` registers them on its app;
each calls one library function, as every command there does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hackable_rl.cli.errors import check_range
from hackable_rl.cli.options import ConfigOption, SetOption
from hackable_rl.cli.options import command_config as _config


def seeds_command(
    ctx: typer.Context,
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated training seeds, e.g. 0,1.")],
    parallel: Annotated[int, typer.Option("--parallel", help="Seeds run at once (threads split between them).")] = 2,
    log_dir: Annotated[Path, typer.Option("--log-dir", help="Where each seed's console log goes.")] = Path(
        "cache/logs"
    ),
) -> None:
    """Run one command (train, eval, ...) once per seed, side by side: `hackable-rl seeds --seeds 0,1 --
    train --metrics-dir metrics/clean` writes metrics/clean/s0 and metrics/clean/s1 (so do --out-dir,
    --out, --output, -o, in either spelling; a file `x.jsonl` becomes x-s0.jsonl, x-s1.jsonl)."""
    from hackable_rl.scheduling.seeds import outcome_line, parse_seeds, run_side_by_side, seed_runs

    values = parse_seeds(seeds)
    check_range("--parallel", parallel, 1, 64)
    runs = seed_runs(list(ctx.args), values, parallel, log_dir)
    codes = run_side_by_side(runs, parallel)
    for run, code in zip(runs, codes, strict=True):
        typer.echo(outcome_line(run, code))
    if any(codes):
        raise typer.Exit(code=max(codes))


def lanes(
    stages: Annotated[list[str], typer.Argument(help="Stage name globs, e.g. 'condition@*' 'reference@*'.")],
    address: Annotated[str | None, typer.Option(envvar="RAY_ADDRESS", help="A Ray cluster (host:port); default: a local Ray.")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="At most this many cells at once.")] = None,
    retries: Annotated[int, typer.Option(help="Retries of a cell whose worker or node died.")] = 3,
    project: Annotated[Path, typer.Option("--project", help="The DVC project (folder).")] = Path("."),
) -> None:
    """Run a study's outdated DVC stages as Ray tasks, each recorded in dvc.lock as it ends (docs/scale-out.md)."""
    from hackable_rl.scheduling.lanes import run_lanes

    results = run_lanes(project, stages, address, jobs, retries, typer.echo)
    raise typer.Exit(code=int(any(result.code for _, result in results)))


def sync(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (cache/artifacts/runs/<run>).")],
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Upload to MLflow what a run logged while the tracking store was unreachable."""
    from hackable_rl.tracking.sync import sync_run

    cfg = _config(config, overrides)
    outcome = sync_run(cfg, run_dir)
    typer.echo(f"{run_dir}: {outcome['replayed']} events uploaded to MLflow run {outcome['run_id']}")


def promote(
    run_id: Annotated[str, typer.Option("--run-id", help="MLflow run id of a training run.")],
    alias: Annotated[str, typer.Option("--alias", help="Registry alias to move, e.g. champion.")] = "champion",
    step: Annotated[int | None, typer.Option("--step", help="Permanent checkpoint step (default: last).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Promote a checkpoint that has no independent eval (registering it first if needed).")] = False,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Move a Model Registry alias onto a run's permanent checkpoint (evaluated ones only, unless --force).

    `eval --run-id` registers the checkpoints it evaluates; training registers none."""
    from hackable_rl.tracking.models_registry import promote as promote_version

    cfg = _config(config, overrides)
    moved = promote_version(cfg, run_id, step, alias, force)
    typer.echo(f"{moved['name']}@{moved['alias']} -> version {moved['version']} (step {moved['step']})")


def ui(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 5000,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Serve the MLflow UI for this project's store on 127.0.0.1."""
    from hackable_rl.tracking.server import serve_ui

    cfg = _config(config, overrides)
    serve_ui(cfg, port, announce=typer.echo)


def docs_blocks(
    files: Annotated[list[Path] | None, typer.Argument(
        help="Docs files (default: README.md, every docs/*.md and every pipelines/*/README.md holding "
             "a generated block).")] = None,
    root: Annotated[Path, typer.Option("--root", help="The repository root the blocks' sources are relative to.")] = Path("."),
    check: Annotated[bool, typer.Option("--check", help="Write nothing; list the stale blocks and exit 1 if any.")] = False,
) -> None:
    """Rewrite every generated block in place from the committed files it names (outcomes.json,
    compare.json, alarm_bench.json, summary.json, ...); --check lists the stale ones instead."""
    from hackable_rl.report.docs_blocks import check_docs, docs_files, rewrite_docs

    paths = files or docs_files(root)
    if not paths:  # nothing to render is not a mistake; the line says where it looked
        typer.echo(f"{root}: no README.md, docs/*.md or pipelines/*/README.md holds a generated block")
        return
    if not check:
        typer.echo("\n".join(rewrite_docs(paths, root)))
        return
    stale = check_docs(paths, root)
    typer.echo("\n".join(stale) if stale else f"{len(paths)} files: every generated block is up to date")
    if stale:
        raise typer.Exit(1)
