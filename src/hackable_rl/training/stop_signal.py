"""SIGTERM and SIGINT during training: a clean stop, not a lost step.

A scheduler's SIGTERM (a cluster's preemption, `kill`, a `dvc queue kill`) or a Ctrl-C during a run
used to end the process wherever it was: mid-step, mid-checkpoint-write, with a traceback. With
`stop_on_signals` around the trainer, the first SIGTERM or SIGINT only asks for a stop: the current
step finishes (and any checkpoint write in it), the Trainer saves a resumable checkpoint at that step
and leaves its loop, and `run_training` marks the run stopped and ends with one line saying how to
resume, exit 143 (SIGTERM) or 130 (SIGINT), as a shell reports a process those signals ended. A
second signal does not wait: it interrupts at once (exit 130; the last resumable checkpoint stays).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from transformers import TrainerCallback

from hackable_rl.core.errors import Stopped
from hackable_rl.core.jsonl import write_json

__all__ = ["EXIT_CODES", "StopOnSignal", "stop_on_signals", "stopped"]

EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}
"""128 + the signal's number: what a shell reports for a process that signal ended."""


class StopOnSignal(TrainerCallback):
    """Asks the Trainer, at the end of the step a signal arrived in, to save a resumable checkpoint and stop."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None

    def handle(self, number: int, frame: Any) -> None:
        del frame
        if self.received is not None:
            raise KeyboardInterrupt  # a second signal: stop now, without the step's end
        self.received = signal.Signals(number)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.received is not None and state.global_step < state.max_steps:
            control.should_save = True
            control.should_training_stop = True
        return control


@contextmanager
def stop_on_signals() -> Iterator[StopOnSignal]:
    """Installs StopOnSignal's handler for SIGTERM and SIGINT (main thread only) and restores the old ones."""
    stop = StopOnSignal()
    try:
        previous = {number: signal.signal(number, stop.handle) for number in EXIT_CODES}
    except ValueError:  # not the main thread: signals stay as they were
        yield stop
        return
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def stopped(run_dir: Path, info: dict[str, Any], tracker: Any, step: int, max_steps: int,
            received: signal.Signals) -> NoReturn:
    """A run a signal stopped at the end of `step`, with its resumable checkpoint there: run.json and the
    MLflow run say so, and one line says how to continue (exit 143 or 130)."""
    write_json(run_dir / "run.json", {**info, "status": "stopped", "stopped_at_step": step, "stopped_by": received.name})
    tracker.end("KILLED")
    raise Stopped(f"{run_dir}: stopped by {received.name} after step {step} of {max_steps}, with a resumable "
                  "checkpoint there; continue with `hackable-rl train --resume auto` (the same config)",
                  EXIT_CODES[received])
