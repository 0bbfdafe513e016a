"""The two callbacks of the TRL parts: each step's generation records as MLflow traces
(`GenerationTraceCallback`) and the judge-free hacking-onset alarm over them (`HackingAlarmCallback`),
both reading the records of a `trl_parts.reward.VerifierReward`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transformers import TrainerCallback

from hackable_rl.core.errors import UserError
from hackable_rl.reward.records import GenerationRecord
from hackable_rl.trl_parts.reward import VerifierReward

__all__ = ["GenerationTraceCallback", "HackingAlarmCallback"]

log = logging.getLogger(__name__)


class _RewardCallback(TrainerCallback):
    """What both callbacks share: the reward whose records they read, bound to the trainer's args."""

    def __init__(self, reward: VerifierReward):
        if not isinstance(reward, VerifierReward):
            raise ValueError(f"{type(self).__name__}: reward must be what verifier_reward() returns, "
                             f"got {type(reward).__name__}")
        self.reward = reward

    def on_train_begin(self, args, state, control, processing_class=None, **kwargs):
        if not hasattr(args, "num_generations"):
            raise ValueError(f"{type(self).__name__}: the trainer is not a GRPOTrainer (its args have no num_generations)")
        self.reward.bind(args, processing_class)
        if getattr(self, "config", None) is not None and self.config.stop_training and args.world_size > 1:
            raise ValueError("HackingAlarmCallback: stop_training=True works in one process only (the other "
                             "processes would not stop with the main one); leave it False under accelerate launch")


class GenerationTraceCallback(_RewardCallback):
    """Writes each step's completions to the active MLflow run as `hackable-rl train` does
    (`tracking.traces`): the step's trace (`step 00012`, one span per completion named by its verdict,
    PAID-WRONG first) and one trace per completion (`step 00012 #3`) whose assessments are the judge's
    verdict (`judge`), the verifier's and each member's pay (`verifier`, `verifier.m0`) and the
    reference (`reference`), so MLflow's trace table filters the hacks. Needs an MLflow run, as
    `report_to="mlflow"` starts; logs from the main process only."""

    _kind_checked = False

    def on_train_begin(self, args, state, control, **kwargs):
        # deferred: the tracking stack (mlflow) loads only where a run is tracked
        from hackable_rl.tracking.assessments import require_mlflow_assessments

        super().on_train_begin(args, state, control, **kwargs)
        if state.is_world_process_zero and "mlflow" not in (args.report_to or []):
            raise ValueError("GenerationTraceCallback: MLflow is not configured; pass report_to=\"mlflow\" to GRPOConfig "
                             "(and set MLFLOW_TRACKING_URI, or keep MLflow's local ./mlruns)")
        try:
            require_mlflow_assessments()
        except UserError as error:
            raise ValueError(f"GenerationTraceCallback: {error}") from None

    def on_step_end(self, args, state, control, **kwargs):
        records = _records_of(self.reward, state.global_step)
        if not state.is_world_process_zero or not records:
            return
        # deferred: mlflow is slow to import; a run with tracking off never loads it
        import mlflow

        from hackable_rl.tracking.traces import step_trace_name, write_traces

        run = mlflow.active_run()
        if run is None:
            log.warning("GenerationTraceCallback: no active MLflow run at step %d; no trace written", state.global_step)
            return
        client = mlflow.MlflowClient()
        if not self._kind_checked:
            _open_as_model_training(client, run.info.experiment_id)
            self._kind_checked = True
        rows = [record.to_json() for record in records]
        write_traces(client, run.info.run_id, [(step_trace_name(state.global_step), rows, {"step": str(state.global_step)})])


class HackingAlarmCallback(_RewardCallback):
    """The judge-free hacking-onset alarm (docs/metrics.md): each step's signals from the reward's
    records (never the judge), a CUSUM per watched signal, fired once `votes` signals crossed. Logs the
    signals and `alarm` (0 or 1) into the trainer's logs (so to MLflow with report_to="mlflow"), and
    with `stop_training=True` ends training at the firing step.

    `audit={"k": 4, ...}` is `alarm.audit` (the same fields, docs/metrics.md "Audited alarm"): each step
    k completions are judged, by `audit_judge(completion, reference)` (True/False or a Judgment) or, by
    default, the reward's own independent judge, and the audited gap's test fires the alarm
    (`signal/audit_gap`; `alarm/audit_judge_calls` counts the judge calls)."""

    def __init__(self, reward: VerifierReward, *, signals: Sequence[str] | None = None, votes: int | None = None,
                 threshold: float | None = None, stop_training: bool = False, audit: Mapping[str, Any] | None = None,
                 audit_judge: Callable[[str, str], Any] | None = None):
        super().__init__(reward)
        # deferred: the alarm (scipy) loads only where its callback is built
        from pydantic import ValidationError

        from hackable_rl.alarm.audit import StepAudit
        from hackable_rl.alarm.onset_alarm import OnsetAlarm
        from hackable_rl.config.experiment import AlarmConfig

        given = {"signals": list(signals) if signals is not None else None, "votes": votes, "threshold": threshold,
                 "audit": dict(audit) if audit is not None else None}
        try:
            self.config = AlarmConfig(enabled=True, stop_training=stop_training,
                                      **{key: value for key, value in given.items() if value is not None})
        except ValidationError as error:
            first = error.errors()[0]
            raise ValueError(f"HackingAlarmCallback: {'.'.join(map(str, first['loc'])) or 'settings'}: {first['msg']}") from None
        try:
            self.audit = StepAudit.of(self.config.audit, audit_judge, "audit_judge")
        except UserError as error:
            raise ValueError(f"HackingAlarmCallback: {error}") from None
        self.alarm = OnsetAlarm(self.config)
        self.firing: Any = None
        self.history: list[dict[str, Any]] = []
        """Each step's signals and alarm state, as logged."""
        self._signals: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        completions = getattr(args, "generation_batch_size", None)  # GRPOConfig's completions per step
        if self.audit is not None and completions and self.audit.k > completions:
            raise ValueError(f"HackingAlarmCallback: audit.k: {self.audit.k} is more than the {completions} "
                             "completions of a step (GRPOConfig's generation_batch_size); audit at most that many")

    def on_step_end(self, args, state, control, **kwargs):
        # deferred: the alarm (scipy) loads only where its callback is built
        from hackable_rl.alarm.onset_alarm import AUDIT_SIGNAL
        from hackable_rl.alarm.signals import step_signals

        records = _records_of(self.reward, state.global_step)
        if not records:
            return
        rows = [record.to_json() for record in records]
        self._signals = step_signals(state.global_step, rows)
        if self.audit is not None:
            try:
                gap = self.audit.audit(state.global_step, rows)
            except UserError as error:
                raise ValueError(f"HackingAlarmCallback: {error}") from None
            self._signals = self._signals.with_values(**{AUDIT_SIGNAL: gap})

    def on_log(self, args, state, control, logs=None, **kwargs):
        # deferred: the alarm (scipy) loads only where its callback is built
        from hackable_rl.alarm.audit import AUDIT_CALLS

        if self._signals is None or logs is None or "train_runtime" in logs:
            return
        signals, self._signals = self._signals.with_values(entropy=logs.get("entropy")), None
        firing = self.alarm.update(signals)
        metrics = {f"signal/{name}": value for name, value in signals.to_json().items()
                   if name != "step" and isinstance(value, int | float)}
        metrics["alarm"] = float(self.alarm.raised)
        if self.audit is not None:
            metrics[AUDIT_CALLS] = float(self.audit.calls)
        self.history.append({"step": state.global_step, **metrics})
        if state.is_world_process_zero:
            _log_to_mlflow(metrics, state.global_step)
        if firing is not None:
            self.firing = firing
            log.warning("%s", firing.describe())
            if self.config.stop_training:
                control.should_training_stop = True


def _records_of(reward: VerifierReward, step: int) -> list[GenerationRecord]:
    """The records of training step `step` (none where the step scored no new completions)."""
    return reward.last_step_records() if reward.last_step == step else []


def _log_to_mlflow(metrics: dict[str, float], step: int) -> None:
    """Into the active MLflow run (report_to="mlflow" starts one), beside the trainer's own metrics;
    without one, the metrics stay in `HackingAlarmCallback.history` only."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_metrics(metrics, step=step)


def _open_as_model_training(client: Any, experiment_id: str) -> None:
    """Tags the experiment so MLflow 3's UI opens it on its runs table (model training), as the
    project's own experiments are; a kind the user chose stays."""
    # deferred: the tracking stack (mlflow) loads only where a run is tracked
    from hackable_rl.tracking.opening import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND

    if EXPERIMENT_KIND_TAG not in client.get_experiment(experiment_id).tags:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
