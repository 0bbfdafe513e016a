"""One writer per run folder: an advisory lock (`fcntl.flock`) on `runs/<run>/.writer.lock`.

Two `train --resume auto` of one run at once (a job believed dead restarted, a condition queued
twice) would both append to metrics.jsonl and the generation files, and both log to one MLflow run:
every step twice. So whatever writes a run folder (`train`, `train --resume`, `sync`) holds this
lock for as long as it writes; a second writer exits 2 naming the holder's PID. The kernel drops
an flock when its process dies, `kill -9` included, so a killed run can always be resumed: the
lock file left behind holds no lock. Where flock is missing (Windows) there is no lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from hackable_rl.core.errors import UserError

LOCK_NAME = ".writer.lock"


def lock_path(run_dir: Path) -> Path:
    return run_dir / LOCK_NAME


def _holder(path: Path) -> str:
    """The PID the holder wrote into the lock file ("unknown" while it has not written it yet)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


def _take(handle: IO[str], path: Path, run_dir: Path) -> None:
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no lock
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise UserError(
            f"{run_dir}: another process (PID {_holder(path)}) is writing this run; wait for it to end, "
            f"or stop it first (a killed process holds no lock: {path.name} is then free)"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Holds the run folder's writer lock for the body (the folder is created if missing); a second
    holder gets a UserError naming the first one's PID."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = lock_path(run_dir)
    with open(path, "a+", encoding="utf-8") as handle:  # "a+": never truncates another holder's PID
        _take(handle, path, run_dir)
        yield  # closing the file releases the lock
