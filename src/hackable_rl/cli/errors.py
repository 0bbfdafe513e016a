"""How a command ends on a user mistake (bad config, bad data, missing files, unknown run ids): one
line per problem on stderr and exit code 2, no traceback; `hackable-rl --debug` shows it instead.
A bug (any other exception) always keeps its traceback.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from hackable_rl.core.errors import ConfigError, Stopped, UserError
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


def _printable(line: str) -> str:
    """The line with every character that is not printable escaped (`\\x85`): a name holding a control or
    line-separator character stays on its one line and shows what it holds."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in line)


def run_user_action(action: Callable[[], Any]) -> Any:
    """Runs `action`; a user mistake becomes one line per problem on stderr and exit code 2."""
    try:
        return action()
    except KeyboardInterrupt:
        if _state["debug"]:
            raise
        typer.secho("interrupted: stopped at once; a training run resumes from its last resumable checkpoint "
                    "with --resume auto", err=True, fg=typer.colors.YELLOW)
        raise typer.Exit(code=130) from None
    except (ConfigError, UserError, RegistryError, *_PATH_ERRORS) as error:
        problems = _problems(error)
        if _state["debug"] or problems is None:
            raise
        stopped = isinstance(error, Stopped)
        for problem in problems:
            # One line each, even when a library's message (quoted in the problem) spans several.
            line = _printable(masked_uri(re.sub(r"\s*\n\s*", " ", problem)))  # never a credential of a URI
            typer.secho(f"{'stopped' if stopped else 'error'}: {line}", err=True,
                        fg=typer.colors.YELLOW if stopped else typer.colors.RED)
        raise typer.Exit(code=error.exit_code if stopped else 2) from None


def fail(message: str) -> None:
    """Ends the command as a user mistake (one line, exit 2)."""
    raise UserError(message)


class UserErrorCommands(TyperGroup):
    """Runs every command inside `run_user_action`, so that a user mistake raised outside an explicit
    call (a path a command writes, a check in its body) still ends as one line and exit code 2."""

    def invoke(self, ctx: typer.Context) -> Any:
        return run_user_action(lambda: _parsed(lambda: super(UserErrorCommands, self).invoke(ctx)))

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> tuple[Any, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _refuse_unusable_inputs(command, name, rest)
        return name, command, rest

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        """The top-level options' parser errors (`hackable-rl --bogus`) in the same one-line form."""
        return run_user_action(lambda: _parsed(lambda: super(UserErrorCommands, self).make_context(*args, **kwargs)))


_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _refuse_unusable_inputs(command: Any, name: str, args: list[str]) -> None:
    """Before a command runs, for every command: an empty path option (`--config ''`, which a path
    reads as the current folder) and a path option or argument naming a FIFO, a device or a socket
    (which a read would block on, or describe as missing) are refused in one line."""
    try:
        parsed = command.make_context(name, list(args), resilient_parsing=True).params
    except Exception:  # the real parse reports it, in the one-line form
        return
    paths = {param: [p for p in (value if isinstance(value, list | tuple) else [value]) if isinstance(p, Path)]
             for param in command.params if (value := parsed.get(param.name)) is not None}
    path_flags = {opt for param, found in paths.items() if found for opt in getattr(param, "opts", [])}
    for index, arg in enumerate(args):
        if not arg.strip() and index and args[index - 1] in path_flags:
            raise UserError(f"{name} {args[index - 1]} {arg!r}: an empty path (blank, or the current folder); "
                            "give a file or a folder")
    for param, found in paths.items():  # a positional path given as '' (read as the current folder) or blank
        if getattr(param, "param_type_name", "") == "argument" and any(not str(p).strip() for p in found) \
                or getattr(param, "param_type_name", "") == "argument" and "" in args and Path(".") in found:
            raise UserError(f"{name} {param.name.upper()}: an empty path (blank, or the current folder); "
                            "give a file or a folder")
    _refuse_writing_what_is_read(paths)
    for param, found in paths.items():
        for path in found:
            if isinstance(path, Path) and (kind := _special_kind(path)):
                flags = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
                where = f"{flags[0]} " if flags and getattr(param, "param_type_name", "") == "option" else ""
                raise UserError(f"{where}{path}: is {kind}; expected a regular file or a folder")


OUTPUT_OPTIONS = ("--output", "--out", "--out-dir", "--metrics-dir")
"""The options every command writes to; any other path option or argument is read."""


def _refuse_writing_what_is_read(paths: dict[Any, list[Path]]) -> None:
    """An output that is an input under another name (the same path, a symlink to it, a hard link) or
    a folder output that holds an input is refused before anything is written: writing it would
    replace, or write among, what the command reads."""
    def flag(param: Any) -> str:
        return next((opt for opt in getattr(param, "opts", []) if opt.startswith("--")), param.name)

    outputs = [(flag(param), path) for param, found in paths.items() if flag(param) in OUTPUT_OPTIONS for path in found]
    inputs = [(flag(param), path) for param, found in paths.items() if flag(param) not in OUTPUT_OPTIONS for path in found]
    for out_flag, out in outputs:
        for in_flag, source in inputs:
            if not source.exists() or not out.exists():
                continue
            if out.is_file() and os.path.samefile(out, source):
                raise UserError(f"{out_flag} {out} is {in_flag} {source} (the same file): writing it would replace "
                                "what the command reads; give another output path")
            if out.is_dir() and source.resolve().is_relative_to(out.resolve()):
                raise UserError(f"{out_flag} {out} holds {in_flag} {source}: the command would write among what "
                                "it reads; give another output folder")


def _special_kind(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return next((kind for test, kind in _SPECIAL_FILES if test(mode)), None)


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
