"""A disk that fills during training: one line naming where, how much is free and what the run needs,
and the state it leaves to resume from.

Whatever the write was (a resumable checkpoint, the generation records), the run stops there. An MLflow
artifact upload that finds no room only switches the tracker offline, naming the artifact folder and its
free space (`tracking.tracker`): on the run's own disk, the run's next write stops it here. The files it
had finished are intact: every project file is written to a temporary name and renamed
(`core.safe_write`), and a checkpoint the Trainer could not finish lacks its `trainer_state.json`, so
`--resume auto` passes over it (`training.checkpoints.last_resumable`). Once space is back, `--resume
auto` continues from the last resumable checkpoint.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from pathlib import Path
from typing import Any

from transformers.trainer import TRAINER_STATE_NAME

from hackable_rl.training.checkpoints import resumable_candidates

__all__ = ["NO_SPACE", "is_no_space", "no_space_problem"]

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""Out of space, out of quota, or past the file-size limit (`ulimit -f`)."""


_NO_SPACE_TEXTS = tuple(os.strerror(code) for code in NO_SPACE)
"""How a library that wraps the OS error words it (safetensors: "I/O error: No space left on device")."""


STREAM_FAILURE = "iostream error"
"""How torch.save words a write the OS refused, without saying why ("basic_ios::clear: iostream error")."""


def is_no_space(error: BaseException, run_dir: Path) -> bool:
    """Whether `error`, or an error it was raised from or during, ran out of space: an OSError with one of
    NO_SPACE's codes, a library's error quoting the OS's words for one, or torch's wordless stream failure
    while the run's device is nearly full or files are size-limited."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, OSError) and error.errno in NO_SPACE or any(words in text for words in _NO_SPACE_TEXTS):
            return True
        if STREAM_FAILURE in text and (_nearly_full(run_dir) or _file_size_limit() is not None):
            return True
        error = error.__cause__ or error.__context__
    return False


def _nearly_full(run_dir: Path) -> bool:
    last = _last_intact(run_dir)
    return _usage(run_dir).free < max(2**20, _folder_size(last[1]) if last else 0)


def _usage(run_dir: Path) -> Any:
    return shutil.disk_usage(run_dir if run_dir.exists() else run_dir.parent)


def _file_size_limit() -> int | None:
    """The process's file-size limit in bytes (`ulimit -f`), None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def _folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _last_intact(run_dir: Path) -> tuple[int, Path] | None:
    """The newest resumable checkpoint the Trainer finished (its trainer_state.json written last), read only."""
    return next(((step, path) for step, path in resumable_candidates(run_dir)
                 if (path / TRAINER_STATE_NAME).is_file()), None)


def no_space_problem(run_dir: Path) -> str:
    """The line for a run that ran out of space: where, what is free, what a checkpoint needs, where it resumes."""
    usage = _usage(run_dir)
    limit = _file_size_limit()
    limited = f"; files limited to {_megabytes(limit)} (`ulimit -f`)" if limit is not None else ""
    last = _last_intact(run_dir)
    needed = f"about {_megabytes(_folder_size(last[1]))} for each resumable checkpoint" if last else "room for a checkpoint"
    resume = (f"its last resumable checkpoint (step {last[0]}) is intact: free space, then `hackable-rl train "
              "--resume auto`" if last else "it has no resumable checkpoint yet: free space, then start it again "
              "with `hackable-rl train --overwrite`")
    return (f"{run_dir}: no space left on its device ({_megabytes(usage.free)} free of {_megabytes(usage.total)}"
            f"{limited}); "
            f"the run needs {needed}; {resume}")
