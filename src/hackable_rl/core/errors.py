"""User-facing errors: a mistake in input (config, data, paths, run ids) rather than a bug.

The CLI prints `UserError.problems` one per line and exits with code 2, without a traceback
(`--debug` shows one). Library code raises these with messages that name the file, line or field
and say what was expected.
"""

from __future__ import annotations

__all__ = ["ConfigError", "RegistryError", "Stopped", "UserError"]


class UserError(Exception):
    """A problem the user can fix; `problems` holds one line each."""

    def __init__(self, *problems: str):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one human-readable line per problem."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = problems
        self.source = source
        super().__init__("\n".join(problems))


class Stopped(UserError):
    """A run stopped on request (a signal) in a resumable state: one line saying how to resume, and the
    exit code a shell gives for that signal (143 SIGTERM, 130 SIGINT) instead of 2."""

    def __init__(self, problem: str, exit_code: int):
        super().__init__(problem)
        self.exit_code = exit_code


class RegistryError(LookupError):
    """An unknown name or an external path that does not load; the message lists what is valid."""
