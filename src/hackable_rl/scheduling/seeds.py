"""`hackable-rl seeds --seeds 0,1 -- train ...`: one command per training seed, side by side.

On a CPU machine two torch processes with one thread each finish about 1.5x sooner than the same two
one after the other with all threads (docs/results.md), while two processes with all threads each
oversubscribe the cores and are far slower than either. So each seed's process gets
`cores // parallel` threads (`torch_threads`), its own `seed`, and its own `s<seed>` folder under
every `--metrics-dir` / `--out-dir` it was given. Each process writes its console to
`<log_dir>/<command>-s<seed>.log`; a failed seed is reported with the tail of its log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hackable_rl.core.bounds import SEED_MAX
from hackable_rl.core.errors import UserError

# Options whose path gets one per seed: a folder its `s<seed>` subfolder, a file (a name with a suffix)
# `<stem>-s<seed><suffix>`; in either spelling, `--out DIR` or `--out=DIR`.
PER_SEED_FOLDERS = ("--metrics-dir", "--out-dir", "--out", "--output", "-o")
_TAIL_LINES = 5


@dataclass(frozen=True)
class SeedRun:
    seed: int
    command: list[str]
    log: Path


def seed_runs(args: list[str], seeds: list[int], parallel: int, log_dir: Path) -> list[SeedRun]:
    """The command line of every seed: `args` with per-seed folders, seed and thread count set."""
    if not args:
        raise UserError("seeds: give the command after --, e.g. `hackable-rl seeds --seeds 0,1 -- train`")
    if len(set(seeds)) != len(seeds):
        raise UserError(f"seeds --seeds: {seeds} repeats a seed")
    threads = max(1, (os.cpu_count() or 1) // min(parallel, len(seeds)))
    given = _set_keys(args)
    if "seed" in given:
        raise UserError("seeds: the command after -- sets seed; seeds sets each run's own (drop that --set)")
    runs = []
    for seed in seeds:
        command = [sys.executable, "-m", "hackable_rl", *_per_seed_folders(args, seed), "--set", f"seed={seed}"]
        command += [] if "torch_threads" in given else ["--set", f"torch_threads={threads}"]  # the user's wins
        runs.append(SeedRun(seed, command, log_dir / f"{args[0]}-s{seed}.log"))
    return runs


def _set_keys(args: list[str]) -> set[str]:
    """The keys the command's own `--set`/`-s` options give."""
    return {value.split("=", 1)[0].strip() for option, value in zip(args[:-1], args[1:], strict=True) if option in ("--set", "-s")}


def _per_seed_folders(args: list[str], seed: int) -> list[str]:
    rewritten = list(args)
    for index, arg in enumerate(rewritten):
        option, equals, value = arg.partition("=")
        if equals and option in PER_SEED_FOLDERS:
            rewritten[index] = f"{option}={_per_seed(value, seed)}"
        elif arg in PER_SEED_FOLDERS and index + 1 < len(rewritten):
            rewritten[index + 1] = _per_seed(rewritten[index + 1], seed)
    return rewritten


def _per_seed(path: str, seed: int) -> str:
    place = Path(path)
    return str(place.with_name(f"{place.stem}-s{seed}{place.suffix}") if place.suffix else place / f"s{seed}")


def run_side_by_side(runs: Sequence[SeedRun], parallel: int) -> list[int]:
    """Runs at most `parallel` commands at a time; returns their exit codes in `runs` order."""
    pending, running, codes = list(enumerate(runs)), [], [0] * len(runs)
    while pending or running:
        while pending and len(running) < parallel:
            index, run = pending.pop(0)
            run.log.parent.mkdir(parents=True, exist_ok=True)
            with run.log.open("w", encoding="utf-8") as log:
                process = subprocess.Popen(run.command, stdout=log, stderr=subprocess.STDOUT)
            running.append((index, process))
        time.sleep(0.5)
        for index, process in list(running):
            if process.poll() is not None:
                codes[index] = process.returncode
                running.remove((index, process))
    return codes


def parse_seeds(text: str) -> list[int]:
    """`seeds --seeds 0,1` as [0, 1] (empty parts ignored); none at all, a repeated seed (two processes
    of one run) or one outside [0, 2**32 - 1] is a UserError."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"seeds --seeds {text!r}: expected comma-separated integers, e.g. 0,1") from None
    if not values:
        raise UserError(f"seeds --seeds {text!r}: no seed given; expected comma-separated integers, e.g. 0,1")
    if len(set(values)) != len(values):
        raise UserError(f"seeds --seeds {text!r}: a seed repeats; each seed is one run, trained once")
    if any(not 0 <= value <= SEED_MAX for value in values):
        raise UserError(f"seeds --seeds {text!r}: seeds are integers in [0, {SEED_MAX}]")
    return values


def outcome_line(run: SeedRun, code: int) -> str:
    """`seed 0: ok; log ...`, or the exit code and the log's last lines when the seed failed."""
    status = "ok" if code == 0 else f"FAILED (exit {code}): {log_tail(run.log)}"
    return f"seed {run.seed}: {status}; log {run.log}"


def log_tail(path: Path) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return " | ".join(line.strip() for line in lines[-_TAIL_LINES:])
