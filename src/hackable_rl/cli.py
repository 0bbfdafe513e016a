"""The `hackable-rl` command line: thin commands, each loads the config and calls one function.

Read this file top to bottom to find the path of one run: prepare -> warmstart -> train -> eval
-> report. User mistakes (bad config, bad data, missing files, unknown run ids) print one line per
problem and exit with code 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import logging
import sys
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


def entrypoint() -> None:  # pragma: no cover - console script shim
    sys.exit(app())
