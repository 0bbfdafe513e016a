"""One writer per run folder: an advisory lock (`fcntl.flock`) on `runs/<run>/.writer.lock`.

Two `train --resume auto` of one run at once (a job believed dead restarted, a condition queued
twice) would both append to metrics.jsonl and the generation files, and both log to one MLflow run:
every step twice. So whatever writes a run folder (`train`, `train --resume`, `sync`) holds this
lock for as long as it writes; a second writer exits 2 naming the holder's PID. The kernel drops
an flock when its process dies, `kill -9` included, so a killed run can always be resumed: the
lock file left behind holds no lock. Where flock is missing (Windows) there is no lock.

The holder writes its PID into the lock file just after taking the lock and empties the file when it
lets go. A refused writer can therefore read the file in between: empty, or still holding the PID of
a killed earlier holder. It trusts only the PID of a live process, and waits briefly for one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from hackable_rl.core.errors import UserError

LOCK_NAME = ".writer.lock"
HOLDER_WAIT_S = 2.0
"""How long a refused writer waits for the holder to write its PID before calling it "unknown"."""


def lock_path(run_dir: Path) -> Path:
    return run_dir / LOCK_NAME


def _written_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _holder(path: Path) -> str:
    """The PID the holder wrote into the lock file. The file may still be empty, or name a killed
    earlier holder, for the moment between the holder's flock and its write: only a live process's
    PID is taken, and "unknown" if none appears within HOLDER_WAIT_S."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        pid = _written_pid(path)
        if pid is not None and _alive(pid):
            return str(pid)
        if time.monotonic() >= deadline:
            return "unknown"
        time.sleep(0.02)


def _take(handle: IO[str], path: Path, run_dir: Path) -> None:
    try:
        # deferred: POSIX only (the module imports everywhere)
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
    _write_holder(handle, f"{os.getpid()}\n")


def _write_holder(handle: IO[str], text: str) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(text)
    handle.flush()


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Holds the run folder's writer lock for the body (the folder is created if missing); a second
    holder gets a UserError naming the first one's PID."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = lock_path(run_dir)
    with open(path, "a+", encoding="utf-8") as handle:  # "a+": never truncates another holder's PID
        _take(handle, path, run_dir)
        try:
            yield
        finally:  # emptied first, so a process that outlives its lock is never named as the holder
            _write_holder(handle, "")
    # closing the file released the lock
