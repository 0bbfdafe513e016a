"""How a command ends on a user mistake (bad config, bad data, missing files, unknown run ids): one
line per problem on stderr and exit code 2, no traceback; `hackable-rl --debug` shows it instead.
A bug (any other exception) always keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.redact import masked_uri
from hackable_rl.core.registry import RegistryError

# What the operating system says about a path the user gave (a folder where a file is expected, a
# missing parent, no permission, a name over 255 bytes, a full disk) is a user mistake too: one line
# naming the path. An OSError without a path keeps its traceback.
_PATH_ERRORS = (OSError,)

_state = {"debug": False}

# The parser's error class. Typer (>= 0.29) carries its own copy of Click, whose classes it does not
# export by name; BadParameter, which it does export, is one of its usage errors.
_UsageError = typer.BadParameter.__mro__[1]


def show_tracebacks(debug: bool) -> None:
    """`--debug`: user mistakes keep their traceback too."""
    _state["debug"] = debug


def _problems(error: Exception) -> list[str] | None:
    """The lines that describe a user mistake, or None for a bug (which keeps its traceback)."""
    if isinstance(error, ConfigError | UserError):
        return error.problems
    if isinstance(error, RegistryError):
        return [str(error)]
    if isinstance(error, _PATH_ERRORS) and error.filename is not None:
        target = f" -> {error.filename2}" if error.filename2 is not None else ""
        return [f"{error.filename}{target}: {(error.strerror or type(error).__name__).lower()}"]
    return None


def run_user_action(action: Callable[[], Any]) -> Any:
    """Runs `action`; a user mistake becomes one line per problem on stderr and exit code 2."""
    try:
        return action()
    except (ConfigError, UserError, RegistryError, *_PATH_ERRORS) as error:
        problems = _problems(error)
        if _state["debug"] or problems is None:
            raise
        for problem in problems:
            # One line each, even when a library's message (quoted in the problem) spans several.
            line = masked_uri(re.sub(r"\s*\n\s*", " ", problem))  # never a credential of a URI
            typer.secho(f"error: {line}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=2) from None


def fail(message: str) -> None:
    """Ends the command as a user mistake (one line, exit 2)."""
    raise UserError(message)


class UserErrorCommands(TyperGroup):
    """Runs every command inside `run_user_action`, so that a user mistake raised outside an explicit
    call (a path a command writes, a check in its body) still ends as one line and exit code 2."""

    def invoke(self, ctx: typer.Context) -> Any:
        return run_user_action(lambda: _parsed(lambda: super(UserErrorCommands, self).invoke(ctx)))

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        """The top-level options' parser errors (`hackable-rl --bogus`) in the same one-line form."""
        return run_user_action(lambda: _parsed(lambda: super(UserErrorCommands, self).make_context(*args, **kwargs)))


def _parsed(action: Callable[[], Any]) -> Any:
    """A command-line parser error (an unknown option or command, a value of the wrong type, a missing
    argument) in the project's one-line form, naming the command and where its help is, instead of
    the framed box Typer draws."""
    try:
        return action()
    except _UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "hackable-rl"
        raise UserError(f"{where}: {error.format_message()} (see `{where} --help`)") from None


def check_range(option: str, value: float, low: float, high: float) -> None:
    """A numeric option outside [low, high] is the user's mistake: one line naming the option."""
    if not low <= value <= high:  # NaN fails both comparisons
        raise UserError(f"{option}: {value:g} is not in [{low:g}, {high:g}]")
