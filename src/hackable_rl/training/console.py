"""What training prints: one line every `trainer.progress_interval` steps, from the project's own
step metrics, in place of the Trainer's per-step dict of about 25 TRL values.

    step 40/200  judge 0.61  reward 0.58  gap -0.03  loss 0.0000  3.1 s/step  eta 8m

judge: the independent judge's correctness; reward: the training verifier's (observed) reward;
gap: reward - judge (the online hacking gap); each the mean over the steps since the last line.
Every step still reaches metrics.jsonl and MLflow through `RunCallback`; this only prints.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from transformers import PrinterCallback, ProgressCallback, TrainerCallback

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.stats import mean

log = logging.getLogger(__name__)

# The step metrics a line shows (RunCallback's row keys) and the column names it shows them under.
_COLUMNS = {"judge": "judge/correctness", "reward": "reward/observed", "gap": "hacking_gap", "loss": "trl/loss"}


def quiet_trainer(trainer: Any) -> None:
    """Removes the Trainer's console printer (ProgressCallback's bar and dict, or PrinterCallback's
    dict: which one depends on `disable_tqdm`); the project's callbacks still receive every log."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def silence_known_warnings() -> None:
    """Filters, by exact message, the warnings TRL's own code raises on every step; nothing else."""
    # TRL 1.16 reads `model.is_gradient_checkpointing` (trl/models/utils.py), which transformers 5
    # deprecated in favour of `is_activation_checkpointing` (same value). The project never reads it
    # and always trains with activation checkpointing off, so the warning says nothing actionable.
    warnings.filterwarnings(
        "ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning,
        module=r"transformers\.modeling_utils",
    )


def loss_note(config: ExperimentConfig) -> str:
    """Why the logged loss is 0, when the config makes it so (docs/methodology.md, "The loss TRL logs")."""
    trainer = config.trainer
    if trainer.loss_type == "grpo" and trainer.beta == 0:
        return "; loss 0 by construction, its gradient is not (docs/methodology.md)"
    return ""


def training_progress(config: ExperimentConfig, latest_row: Callable[[], Mapping[str, Any]]) -> TrainingProgress:
    """The run's progress callback, with a header that names the columns (and says why loss is 0)."""
    every = config.trainer.progress_interval
    header = (
        f"training {config.run_name}: {config.trainer.max_steps} steps, a line every "
        f"{f'{every} steps' if every > 1 else 'step'} "
        f"(judge: independent correctness; reward: training verifier; gap: reward - judge){loss_note(config)}"
    )
    return TrainingProgress(every, latest_row, header)


class TrainingProgress(TrainerCallback):
    """Logs one progress line every `every` steps (and at the last step). `latest_row` returns the
    metrics row RunCallback built for the step just logged; list this callback after RunCallback."""

    def __init__(
        self,
        every: int,
        latest_row: Callable[[], Mapping[str, Any]],
        header: str = "",
        clock: Callable[[], float] = time.monotonic,
    ):
        self.every, self.latest_row, self.header, self._clock = every, latest_row, header, clock
        self._window: list[Mapping[str, Any]] = []
        self._since = clock()

    def on_train_begin(self, args, state, control, **kwargs):
        self._since = self._clock()
        if self.header:
            log.info("%s", self.header)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "train_runtime" in (logs or {}):  # the Trainer's end-of-training summary, not a step
            return
        self._window.append(dict(self.latest_row()))
        step = state.global_step
        if step % self.every == 0 or step >= state.max_steps:
            now = self._clock()
            seconds_per_step = (now - self._since) / len(self._window)
            log.info("%s", progress_line(step, state.max_steps, self._window, seconds_per_step))
            self._window, self._since = [], now


def progress_line(step: int, max_steps: int, rows: list[Mapping[str, Any]], seconds_per_step: float) -> str:
    """`step 40/200  judge 0.61  reward 0.58  gap -0.03  loss 0.0000  3.1 s/step  eta 8m`: each
    metric the mean of `rows` (a metric no row has, such as judge when nothing was judged: `-`)."""
    values = {name: mean(row.get(key) for row in rows) for name, key in _COLUMNS.items()}
    metrics = "  ".join(
        f"{name} {_number(value, 4 if name == 'loss' else 2)}" for name, value in values.items()
    )
    eta = _duration((max_steps - step) * seconds_per_step)
    return f"step {step}/{max_steps}  {metrics}  {seconds_per_step:.1f} s/step  eta {eta}"


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{round(value, digits) + 0.0:.{digits}f}"  # + 0.0: no "-0.0000"


def _duration(seconds: float) -> str:
    """`45s`, `8m`, `1h05m`: as precise as a remaining time deserves."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes}m" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"
