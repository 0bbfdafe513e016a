"""The command line (`hackable-rl`): the Typer app and its commands (`cli.app`), how a command ends on a
user mistake (`cli.errors`), the options several commands share (`cli.options`), and the study and
alarm commands (`cli.study`, `cli.alarm`). docs/usage.md describes every command."""

from hackable_rl.cli.app import app

__all__ = ["app"]
