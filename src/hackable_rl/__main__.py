"""`python -m hackable_rl ...` is the `hackable-rl` command."""

from hackable_rl.cli import app

app()
