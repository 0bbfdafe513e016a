"""The training callback: writes each step's records and metrics, saves permanent checkpoints, and
sends everything to MLflow at checkpoint boundaries. A permanent checkpoint goes to MLflow as run
artifacts with the version it will become (`tracking.versions`); evaluation registers it.

Why at checkpoint boundaries: after a `kill -9`, training resumes from the last resumable
checkpoint K and reruns steps K+1.. . MLflow cannot delete metric points, so anything it had
received for those steps would appear twice. Local files get each step at once (flushed); MLflow
gets steps up to K when checkpoint K is written, and the rest at the end.

The hacking-onset alarm (`alarm.onset_alarm`) sees every step once its TRL log arrives (the entropy is
in it): its signals (`alarm.signals`, the truncation probe's when it is on) go to alarm.jsonl at
once, and every metrics row gets `alarm` (0 before the alarm fired, 1 from its step on: the event
marker on the step charts); where it fires, a console line, MLflow tags (sent at once: setting a tag
twice cannot duplicate anything), two more keys in that step's row and, with `alarm.stop_training`,
the end of training. With `alarm.audit.k` the step's audited gap (`alarm.audit`) joins its
signals, and every metrics row gets the audit's judge calls so far and the step's audited gap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from hackable_rl.alarm.audit import AUDIT_CALLS, AUDIT_GAP_METRIC, StepAudit
from hackable_rl.alarm.onset_alarm import ALARM_FILE, AUDIT_SIGNAL, AlarmFiring, OnsetAlarm
from hackable_rl.alarm.signals import StepSignals, step_signals
from hackable_rl.config.experiment import AlarmConfig
from hackable_rl.core.jsonl import append_jsonl, read_jsonl, write_jsonl
from hackable_rl.tracking import Tracker
from hackable_rl.tracking.rewind import points_mlflow_lacks
from hackable_rl.tracking.tables import block_bounds, generations_table
from hackable_rl.tracking.traces import step_trace_name
from hackable_rl.tracking.versions import CHECKPOINT_EVENTS, CheckpointVersion, checkpoint_artifact
from hackable_rl.tracking.views import chart_names
from hackable_rl.training.checkpoints import permanent_root, save_permanent
from hackable_rl.training.constant_series import ConstantSeries, Point, constant_tags, released_in
from hackable_rl.training.curves import step_metrics
from hackable_rl.training.recorder import GenerationRecorder, step_file

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What the callback needs to know about the run it serves."""

    run_dir: Path
    recorder: GenerationRecorder
    tracker: Tracker
    tokenizer: Any
    permanent_steps: set[int]
    config_hash: str
    base_model: str
    registered_model_name: str  # the model evaluation registers the checkpoints under
    version_tags: dict[str, Any]  # the tags of each checkpoint's version-to-be (the callback adds its step)
    log_tables: bool
    describe_version: Callable[[int], str]  # step -> the first line of the version's description
    alarm: AlarmConfig = field(default_factory=AlarmConfig)
    probe: Callable[[Any, list[dict[str, Any]]], float | None] | None = None
    """The truncation probe (`alarm.truncation_probe`): (policy, the step's records) -> its share; None: off."""


class RunCallback(TrainerCallback):
    def __init__(self, run: RunContext):
        self.run = run
        self._step_metrics: dict[str, Any] = {}
        self._pending_metrics: list[tuple[int, dict[str, Any]]] = []
        self._pending_tables: list[int] = []
        self._pending_permanent: list[tuple[int, Path]] = []
        self._resumed_at: int | None = None  # the step `catch_up` resumed from, until the first send after it
        self.summary: dict[str, Any] = {}
        self.last_row: dict[str, Any] = {}  # the metrics row of the step logged last (console progress reads it)
        self.alarm = OnsetAlarm(run.alarm)
        self._signals: StepSignals | None = None  # the step's alarm signals, until its log brings the entropy
        self.audit = StepAudit.of(run.alarm.audit) if run.alarm.enabled else None
        self._audit_row: dict[str, float] = {}  # the step's audit metrics, until its log row is written
        self.constant_series = ConstantSeries()  # flat diagnostics stay out of the charts (tags at the end)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        records = self.run.recorder.flush(step)
        self._step_metrics = step_metrics(records) if records else {}
        if records:
            self._pending_tables.append(step)
        if records and self.run.alarm.enabled:
            rows = [record.to_json() for record in records]
            survival = self.run.probe(model, rows) if self.run.probe is not None else None
            self._signals = step_signals(step, rows, truncation_survival=survival)
            if self.audit is not None:
                self._audit_step(step, rows)
        if self._is_permanent(step, state):
            self._save_permanent(step, model)

    def _audit_step(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The step's audited gap into its signals (and so alarm.jsonl), and its metrics."""
        gap = self.audit.audit(step, rows)
        self._signals = self._signals.with_values(**{AUDIT_SIGNAL: gap})
        self._audit_row = {AUDIT_CALLS: float(self.audit.calls), **({AUDIT_GAP_METRIC: gap} if gap is not None else {})}

    def _is_permanent(self, step: int, state) -> bool:
        return step in self.run.permanent_steps or step == state.max_steps

    def _save_permanent(self, step: int, model: Any) -> None:
        path = save_permanent(
            model, self.run.tokenizer, self.run.run_dir, step, self._step_metrics,
            self.run.config_hash, self.run.base_model,
        )
        self._pending_permanent.append((step, path))
        log.info("permanent checkpoint at step %d: %s", step, path)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        logs = logs or {}
        if "train_runtime" in logs:  # the Trainer's end-of-training summary, not a step
            self.summary = {f"train/{key}": value for key, value in logs.items()}
            return
        trl = {f"trl/{key}": value for key, value in logs.items() if isinstance(value, int | float)}
        firing = self._update_alarm(logs.get("entropy"))  # TRL logs no entropy for some losses
        marker = {"alarm": float(self.alarm.raised), **self._audit_row} if self.run.alarm.enabled else {}
        self._audit_row = {}
        row = self.last_row = {**self._step_metrics, **trl, **marker, **(firing.metrics() if firing else {})}
        self.run.recorder.append_metrics(state.global_step, row)
        self._pending_metrics.append((state.global_step, row))
        if firing is not None:
            self._raise_alarm(firing, state, control, model)

    @property
    def _alarm_path(self) -> Path:
        return self.run.run_dir / ALARM_FILE

    def _update_alarm(self, entropy: float | None) -> AlarmFiring | None:
        """Feeds the step's signals, with TRL's entropy, to the alarm and writes them to alarm.jsonl;
        the firing at the step the alarm fires."""
        if self._signals is None:  # alarm off, or a step without records
            return None
        signals, self._signals = self._signals.with_values(entropy=entropy), None
        firing = self.alarm.update(signals)
        append_jsonl(self._alarm_path, [{**signals.to_json(), "alarm": firing.signal if firing else None}])
        return firing

    def _raise_alarm(self, firing: AlarmFiring, state, control, model: Any) -> None:
        """The console line and the MLflow tags; with `alarm.stop_training`, the end of training at
        this step with a resumable and a permanent checkpoint of it, as at max_steps."""
        log.warning("%s", firing.describe())
        self.run.tracker.set_tags(firing.tags())
        if not self.run.alarm.stop_training:
            return
        log.warning("stopping training at step %d (alarm.stop_training)", firing.step)
        control.should_training_stop = True
        control.should_save = True
        if not self._is_permanent(firing.step, state):  # else on_step_end saved it already
            self._save_permanent(firing.step, model)

    def on_save(self, args, state, control, **kwargs):
        self.flush_to_tracker()

    def on_train_end(self, args, state, control, **kwargs):
        self.flush_to_tracker()
        self.run.tracker.set_tags(constant_tags(self.run.recorder.metrics_rows(), self.constant_series.released))
        if self.summary:  # the Trainer's totals: a summary file, not single-point charts
            self.run.tracker.log_dict(self.summary, "summary/trainer.json")

    def catch_up(self, events: list[dict[str, Any]], step: int) -> None:
        """On resume from checkpoint `step`: queue what MLflow never received for steps up to it
        (a kill between writing a checkpoint and flushing it to MLflow); `events` is the run's event log.
        The alarm gets back its history up to `step`."""
        self._rewind_alarm(step)
        self._resumed_at = step
        self.constant_series.released |= released_in(events)
        sent_steps = {e["step"] for e in events if e["event"] == "metrics" and e.get("step") is not None}
        sent_tables = _tabled_step_files(events)
        sent_checkpoints = {e["artifact_path"] for e in events if e["event"] in CHECKPOINT_EVENTS}
        generations = self.run.recorder.generations_dir
        for row in self.run.recorder.metrics_rows():
            if row["step"] > step or row["step"] in sent_steps:
                continue
            self._pending_metrics.append((row["step"], {k: v for k, v in row.items() if k != "step"}))
            records = step_file(generations, row["step"])
            if records.exists() and str(records.resolve()) not in sent_tables:
                self._pending_tables.append(row["step"])
        for folder in sorted(permanent_root(self.run.run_dir).glob("step-*")):
            step = int(folder.name.split("-")[1])
            if checkpoint_artifact(step) not in sent_checkpoints:
                self._pending_permanent.append((step, folder))

    def _rewind_alarm(self, step: int) -> None:
        """The alarm as it was after `step`, so it fires where an unbroken run would (and not twice);
        alarm.jsonl rows of the abandoned steps after it are dropped (their records are in abandoned/)."""
        if not self._alarm_path.exists():
            return
        kept = [row for row in read_jsonl(self._alarm_path, torn_tail_ok=True) if row["step"] <= step]
        write_jsonl(self._alarm_path, kept)
        self.alarm = OnsetAlarm.replayed(self.run.alarm, kept)
        if self.audit is not None:  # each audited step's row holds its audited gap (null or not)
            self.audit.calls = self.audit.k * sum(AUDIT_SIGNAL in row for row in kept)

    def flush_to_tracker(self) -> None:
        """Sends buffered step metrics, generation tables and permanent checkpoints (as artifacts,
        registered only once evaluated) to MLflow."""
        tracker = self.run.tracker
        history = self.run.recorder.metrics_rows() if self._pending_metrics else []
        points = self.constant_series.points_to_send(self._pending_metrics, history)
        points = [(step, chart_names(row)) for step, row in points]
        if self._resumed_at is not None:  # a kill may have cut the events of points MLflow received
            points = self._without_held(points)
        for step, row in points:
            tracker.log_metrics(row, step=step)
        if self.run.log_tables:
            for first, last in sorted({block_bounds(step) for step in self._pending_tables}):
                files = _block_files(self.run.recorder.generations_dir, first, last)
                tracker.log_table_files(files, generations_table(first))
            tracker.log_traces([self._step_trace(step) for step in sorted(set(self._pending_tables))])
        for step, path in self._pending_permanent:
            tracker.log_checkpoint(path, checkpoint_artifact(step), self._version(step))
        self._pending_metrics, self._pending_tables, self._pending_permanent = [], [], []

    def _without_held(self, points: list[Point]) -> list[Point]:
        """The first send after a resume from step K: of the points of steps up to K (which the resumed
        run did not train again), those MLflow already holds stay out (`tracking.rewind`); steps after
        K are new values and always go."""
        caught_up = [(step, row) for step, row in points if step <= self._resumed_at]
        trained = [(step, row) for step, row in points if step > self._resumed_at]
        self._resumed_at = None
        return points_mlflow_lacks(self.run.tracker, caught_up) + trained

    def _version(self, step: int) -> CheckpointVersion:
        """The registry version the checkpoint at `step` becomes once evaluated."""
        run = self.run
        return CheckpointVersion.of(run.registered_model_name, {**run.version_tags, "step": step},
                                    run.describe_version(step))

    def _step_trace(self, step: int) -> tuple[list[Path], str, dict[str, Any]]:
        """The step's completions as one trace (`tracking/traces.py`), tagged with the step and the run."""
        shown = {key: value for key, value in self.run.version_tags.items() if key != "run_id"}
        files = [step_file(self.run.recorder.generations_dir, step)]
        return files, step_trace_name(step), {**shown, "step": step}


def _block_files(generations_dir: Path, first: int, last: int) -> list[Path]:
    """The step files of one generation table's block of steps, in step order (a table is always
    rewritten whole from them, so sending it again cannot duplicate a row)."""
    return [path for step in range(first, last + 1) if (path := step_file(generations_dir, step)).exists()]


def _tabled_step_files(events: list[dict[str, Any]]) -> set[str]:
    """Step files some table event of the event log already carried to MLflow."""
    return {path for e in events if e["event"] == "table" for path in e.get("paths") or [e.get("path")] if path}
