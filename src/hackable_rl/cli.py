"""The `hackable-rl` command line: thin commands, each loads the config and calls one function.

Read this file top to bottom to find the path of one run: prepare -> warmstart -> train -> eval
-> report. User mistakes (bad config, bad data, missing files, unknown run ids) print one line per
problem and exit with code 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import logging
import sys
from enum import Enum
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from hackable_rl import __version__
from hackable_rl.config import ConfigError, ExperimentConfig, load_config
from hackable_rl.errors import UserError
from hackable_rl.registry import RegistryError

app = typer.Typer(
    name="hackable-rl",
    help="GRPO on verifiable maths against imperfect verifiers: prepare, warm start, train, evaluate, report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
log = logging.getLogger("hackable_rl")

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="params YAML file.")]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one value, e.g. --set corruption.rate=0.4 (repeatable)."),
]
_state = {"debug": False}


class ResumeMode(str, Enum):
    never = "never"
    auto = "auto"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hackable-rl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for every error.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at DEBUG level.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """hackable-rl: does a policy trained on an imperfect verifier learn to be correct, or to please it?"""
    _state["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def run_user_action(action: Callable[[], Any]) -> Any:
    """Runs `action`; a user mistake becomes one line per problem on stderr and exit code 2."""
    try:
        return action()
    except (ConfigError, UserError) as error:
        if _state["debug"]:
            raise
        for problem in error.problems:
            typer.secho(f"error: {problem}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=2) from None
    except RegistryError as error:
        if _state["debug"]:
            raise
        typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=2) from None


def _config(config: Path, overrides: list[str] | None) -> ExperimentConfig:
    return run_user_action(lambda: load_config(config, overrides or []))


@app.command()
def validate(
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    explain: Annotated[bool, typer.Option("--explain", help="Print every field with its description.")] = False,
) -> None:
    """Validate a params file and print the resolved config (or one line per problem, exit 2)."""
    resolved = _config(config, overrides)
    if explain:
        for line in _describe_fields(type(resolved)):
            typer.echo(line)
        return
    typer.echo(yaml.safe_dump(resolved.model_dump(mode="json"), sort_keys=False).rstrip())
    typer.secho(f"# {config}: valid (run name {resolved.run_name})", err=True, fg=typer.colors.GREEN)


def _describe_fields(model: type, prefix: str = "") -> list[str]:
    from pydantic import BaseModel

    lines = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.extend(_describe_fields(annotation, f"{prefix}{name}."))
        else:
            lines.append(f"{prefix}{name}: {' '.join((field.description or '').split())}")
    return lines


@app.command()
def judge(
    input: Annotated[Path, typer.Option("--input", "-i", help="JSONL of completions to judge.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the judged JSONL.")],
    completion_field: Annotated[str, typer.Option(help="Field holding the completion text.")] = "completion",
    reference_field: Annotated[
        str, typer.Option(help="Field holding the reference: GSM8K '#### N', a MATH \\boxed solution, or a bare answer.")
    ] = "reference",
    extract: Annotated[
        str, typer.Option(help="strict (format required), boxed (last box) or cascade (box, ####, 'answer is', last number).")
    ] = "strict",
    rel_tol: Annotated[float, typer.Option(help="Relative tolerance of numeric comparison.")] = 1e-6,
    timeout_s: Annotated[float, typer.Option(help="Per-call math-verify timeout in seconds.")] = 2.0,
) -> None:
    """Judge any JSONL of completions with the independent (clean) judge; adds correct/parsed/reason."""
    from rich.console import Console
    from rich.table import Table

    from hackable_rl.evaluation.judge import judge_file

    summary = run_user_action(
        lambda: judge_file(input, output, completion_field, reference_field, extract, rel_tol, timeout_s)
    )
    table = Table(title=f"judged {input} -> {output} ({extract})")
    for column in ("rows", "judged", "correct", "accuracy", "unparseable", "no answer"):
        table.add_column(column, justify="right")
    accuracy = "-" if summary.accuracy is None else f"{summary.accuracy:.4f}"
    table.add_row(*map(str, (summary.count, summary.judged, summary.correct, accuracy, summary.unparseable, summary.no_answer)))
    Console(width=120).print(table)


@app.command()
def train(
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    resume: Annotated[
        ResumeMode, typer.Option("--resume", help="`auto`: continue the run of this name from its last checkpoint.")
    ] = ResumeMode.never,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Start again over an existing run folder.")] = False,
    metrics_dir: Annotated[Path, typer.Option("--metrics-dir", help="Where train.json goes (DVC metrics).")] = Path(
        "metrics"
    ),
) -> None:
    """Train one policy with GRPO (TRL) against the configured training verifier."""
    from hackable_rl.training.run import run_training

    cfg = _config(config, overrides)
    result = run_user_action(
        lambda: run_training(cfg, resume=resume.value, overwrite=overwrite, metrics_out=metrics_dir)
    )
    typer.echo(f"run {cfg.run_name}: {result.final_step} steps, MLflow run {result.run_id}, folder {result.run_dir}")


@app.command()
def sync(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (cache/artifacts/runs/<run>).")],
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Upload to MLflow what a run logged while the tracking store was unreachable."""
    from hackable_rl.tracking.sync import sync_run

    cfg = _config(config, overrides)
    outcome = run_user_action(lambda: sync_run(cfg, run_dir))
    typer.echo(f"{run_dir}: {outcome['replayed']} events uploaded to MLflow run {outcome['run_id']}")


@app.command()
def promote(
    run_id: Annotated[str, typer.Option("--run-id", help="MLflow run id of a training run.")],
    alias: Annotated[str, typer.Option("--alias", help="Registry alias to move, e.g. champion.")] = "champion",
    step: Annotated[int | None, typer.Option("--step", help="Permanent checkpoint step (default: last).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Promote a version that has no independent eval.")] = False,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Move a Model Registry alias onto a run's permanent checkpoint (evaluated ones only, unless --force)."""
    from hackable_rl.tracking.models_registry import promote as promote_version

    cfg = _config(config, overrides)
    moved = run_user_action(lambda: promote_version(cfg, run_id, step, alias, force))
    typer.echo(f"{moved['name']}@{moved['alias']} -> version {moved['version']} (step {moved['step']})")


@app.command()
def ui(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 5000,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Serve the MLflow UI for this project's store on 127.0.0.1."""
    from hackable_rl.tracking.server import serve_ui

    cfg = _config(config, overrides)
    run_user_action(lambda: serve_ui(cfg, port))


def entrypoint() -> None:  # pragma: no cover - console script shim
    sys.exit(app())
