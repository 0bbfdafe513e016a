"""Writing an output file without clobbering what is not ours to replace.

Every file the project writes whole (JSON, JSONL, run.json) goes through `replace_file`: the
content goes to a temporary file beside the target, which is then renamed over it, so a reader or a
kill never sees half a file. A rename replaces whatever sits at the name, so before writing:

- a device node, FIFO or socket is refused (`-o /dev/null` as root would otherwise turn the
  system's /dev/null into a regular file), and so is a folder;
- a symlink is written *through*: its target is replaced and the link stays a link (the target must
  itself be a regular file or a new path);
- the temporary file is removed on every failure path, so a failed write leaves no `*.tmp` behind.

This module is the bottom floor: it imports only `errors`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hackable_rl.core.errors import UserError

_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def not_a_file_problem(path: Path) -> str | None:
    """Why an existing `path` (symlinks followed) cannot be replaced by a written file, or None."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # a new path, a dangling symlink (its target is then created), a file in the way of a
        # parent folder (which the folder's creation reports)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder; expected a file path to write"
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return f"is {kind}, not a regular file; refusing to replace it (choose a file path)"


def not_a_readable_file_problem(path: Path) -> str | None:
    """Why `path` (symlinks followed) cannot be read as a file: it does not exist, is a folder, or is a
    FIFO, a device or a socket (a read would block, or read forever); None for a regular file."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    return f"is {_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular file"


def write_target(path: str | Path) -> Path:
    """The file a write to `path` replaces: `path` itself, or the target of a symlink at `path` (written
    through). A folder, device, FIFO or socket there is a UserError naming `path`."""
    path = Path(path)
    problem = not_a_file_problem(path)
    if problem is not None:
        raise UserError(f"{path}: {problem}")
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _temp_name(target: Path) -> Path:
    # Short and hidden: `<name>.tmp` would pass the 255-byte name limit for a long name, and a
    # process id keeps two writers of one folder from sharing a temporary file.
    return target.with_name(f".{target.name[:96]}.{os.getpid()}.tmp")


@contextmanager
def replace_file(path: str | Path, mode: str = "w") -> Iterator[object]:
    """Opens a temporary file for writing (text, UTF-8, or binary with mode "wb"); when the body
    ends, the file replaces `path` (see the module's rules). On any failure the temporary file is
    removed and `path` is left as it was."""
    target = write_target(path)
    temp = _temp_name(target)
    encoding = None if "b" in mode else "utf-8"
    try:
        with open(temp, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
