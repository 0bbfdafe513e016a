"""A child process that dies with its parent (Linux), for the launchers that start training commands."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent"]


def die_with_parent() -> None:
    """Linux: this process is killed (SIGKILL) when its parent dies; elsewhere nothing happens. A
    training command whose launcher or Ray worker was killed would otherwise train on beside the
    retry or the resume, two writers in one run folder."""
    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the call: nothing would signal us
        os._exit(1)
