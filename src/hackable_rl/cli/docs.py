"""`hackable-rl docs-blocks`: the generated blocks of README.md and docs/*.md rendered again from the
committed result files (`report.docs_blocks`; docs/results.md, "How the numbers here are made").
Registered on the app by `cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def docs_blocks(
    files: Annotated[list[Path] | None, typer.Argument(
        help="Docs files (default: README.md and every docs/*.md holding a generated block).")] = None,
    root: Annotated[Path, typer.Option("--root", help="The repository root the blocks' sources are relative to.")] = Path("."),
    check: Annotated[bool, typer.Option("--check", help="Write nothing; list the stale blocks and exit 1 if any.")] = False,
) -> None:
    """Rewrite every generated block in place from the committed files it names (outcomes.json,
    compare.json, alarm_bench.json, summary.json, ...); --check lists the stale ones instead."""
    from hackable_rl.report.docs_blocks import check_docs, docs_files, rewrite_docs

    paths = files or docs_files(root)
    if not paths:  # nothing to render is not a mistake; the line says where it looked
        typer.echo(f"{root}: no README.md or docs/*.md holds a generated block")
        return
    if not check:
        typer.echo("\n".join(rewrite_docs(paths, root)))
        return
    stale = check_docs(paths, root)
    typer.echo("\n".join(stale) if stale else f"{len(paths)} files: every generated block is up to date")
    if stale:
        raise typer.Exit(1)
