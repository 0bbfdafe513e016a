"""`hackable-rl alarm-bench`: the hacking-onset alarm against the judge, over studies' committed runs
(`alarm.bench.replay`; with `--audit`, the audited alarm: `alarm.bench.audit`; docs/usage.md).
Registered on the app by `cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hackable_rl.cli.errors import fail


def alarm_bench(
    studies: Annotated[list[Path], typer.Argument(help="Studies' results folders (study.yaml beside each).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for alarm_bench.json and alarm_bench.md.")] = Path("reports"),
    config: Annotated[Path, typer.Option("--config", "-c", help="params YAML whose alarm section is the base.")] = Path("params.yaml"),
    curve_fallback: Annotated[bool, typer.Option(
        help="Where a run has no signals.csv, read the observed reward of its curve.csv (a smoke check).")] = False,
    audit: Annotated[bool, typer.Option(
        "--audit", help="Benchmark the audited alarm instead (k judged completions per step, replayed from each "
                        "run's curve.csv): audit_bench.json and audit_bench.md.")] = False,
) -> None:
    """Per distinct run: hacked or not (the study's hacking_definition), the judge onset, each signal's
    and the alarm's firing step and lead; thresholds chosen on the tune split, scored on the held-out.
    With --audit: the same for k = 1, 2, 4, 8, 16 and 32 audited completions per step."""
    from hackable_rl.alarm.bench.audit import run_audit_bench
    from hackable_rl.alarm.bench.audit_markdown import audit_markdown
    from hackable_rl.alarm.bench.replay import bench_markdown, run_alarm_bench
    from hackable_rl.config.loading import load_config
    from hackable_rl.core.storage import check_output_path

    missing = [str(folder) for folder in studies if not folder.is_dir()]
    if missing:
        fail(f"alarm-bench: no such results folder: {', '.join(missing)}")
    check_output_path(out, "--out", folder=True)
    if audit:
        lines = audit_markdown(run_audit_bench(studies, load_config(config).alarm, out))
        typer.echo("\n".join(lines[:lines.index("## Both tests per k")]).rstrip())  # the k curve and the answer
        typer.echo(f"written to {out / 'audit_bench.json'} and {out / 'audit_bench.md'}")
        return
    document = run_alarm_bench(studies, load_config(config).alarm, out, curve_fallback)
    typer.echo("\n".join(bench_markdown(document)[:len(document["rules"]) + 8]))
    typer.echo(f"written to {out / 'alarm_bench.json'} and {out / 'alarm_bench.md'}")
