"""`hackable-rl train`: one GRPO run, top to bottom.

    config -> run folder (fresh or resumed) -> policy + tokenizer -> prompts dataset
           -> reward pipeline (training verifier + objective) -> TRL GRPOTrainer + RunCallback
           -> generation records, metrics, permanent checkpoints -> MLflow run (the checkpoints as
              artifacts: `hackable-rl eval --run-id` registers the ones it evaluates)

`run_training` reads as set up (`training.setup.set_up`), train (`_trainer`, `_train`; TRL's
trainer: `training.trainer`) and finish (`_finish`).
The run folder itself (run.json, config.yaml, `--overwrite`, `--resume`) is `training.run_dir`.
Launched as several processes, the main one does all of that and the others only train
(`_train_beside_main`, `training.ranks`).
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.alarm.onset_alarm import write_run_signals
from hackable_rl.alarm.truncation_probe import TruncationProbe
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_json
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.core.run_lock import run_lock
from hackable_rl.core.storage import Storage
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.reward.pipeline import ObjectiveReward, RewardPipeline, build_reward_pipeline
from hackable_rl.tracking.descriptions import train_description
from hackable_rl.tracking.versions import checkpoint_artifacts, without_registered_versions
from hackable_rl.training.callback import RunCallback, RunContext
from hackable_rl.training.checkpoints import permanent_steps
from hackable_rl.training.console import training_progress
from hackable_rl.training.curves import summarise_curve, write_curve
from hackable_rl.training.disk_full import is_no_space, no_space_problem
from hackable_rl.training.ranks import Ranks, process_ranks
from hackable_rl.training.recorder import GenerationRecorder
from hackable_rl.training.run_dir import (
    Resume,
    refuse_foreign,
)
from hackable_rl.training.setup import RunSetup, event_log, policy_and_prompts, set_up
from hackable_rl.training.stop_signal import stop_on_signals, stopped
from hackable_rl.training.trainer import completion_only_head, grpo_trainer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    run_id: str | None
    final_step: int
    metrics: dict[str, Any]
    main_process: bool = True
    """False in the other processes of a multi-process run: they report nothing of their own."""


def run_training(
    config: ExperimentConfig,
    resume: Resume = "never",
    overwrite: bool = False,
    metrics_out: Path | None = None,
    extra_callbacks: list[Any] = (),
    allow_config_change: bool = False,
) -> TrainResult:
    """Trains one policy with GRPO against the configured training verifier.

    `resume="auto"` continues the run of this name from its last resumable checkpoint, only under the
    config it started with (see `training.resume_guard`) unless `allow_config_change`; `overwrite`
    starts again over a run folder hackable-rl created (never over any other folder).
    `metrics_out` (the DVC metrics folder) receives train.json and train_curve.csv;
    `extra_callbacks` (TrainerCallback) run after the project's own (benchmarks time steps this way).
    """
    ranks = process_ranks(config)
    if not ranks.is_main:
        return _train_beside_main(config, ranks, extra_callbacks)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    refuse_foreign(run_dir)  # before the lock file goes in: someone else's folder stays untouched
    with run_lock(run_dir):  # one writer per run folder; a second one exits 2 naming this PID
        run = set_up(config, resume, overwrite, allow_config_change, ranks)
        context = _run_context(run)
        with stop_on_signals() as stop:  # SIGTERM/SIGINT: the step ends, a resumable checkpoint, then stop
            trainer = _trainer(run, context, [*extra_callbacks, stop])
            started = time.time()
            _train(run, trainer)
        if stop.received is not None and trainer.state.global_step < config.trainer.max_steps:
            stopped(run.run_dir, run.info, run.tracker, trainer.state.global_step, config.trainer.max_steps, stop.received)
        return _finish(run, trainer.state.global_step, time.time() - started, metrics_out)


# --------------------------------------------------------------------------- set up


def _train_beside_main(config: ExperimentConfig, ranks: Ranks, extra_callbacks: list[Any]) -> TrainResult:
    """A process other than the main one: the main process's run start (its resume point), the same
    policy and prompts, and TRL's loop with no callback of the project's. Its generation records go
    to the main process (`Ranks.gather`); it writes nothing to the run folder or MLflow itself."""
    start = ranks.share(None)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    model, tokenizer, dataset = policy_and_prompts(config)
    pipeline = build_reward_pipeline(config, tokenizer=tokenizer)
    recorder = GenerationRecorder(run_dir, gather=ranks.gather)
    trainer = _grpo_trainer(config, model, tokenizer, dataset, pipeline, recorder, run_dir, list(extra_callbacks))
    with completion_only_head(config.trainer.head_on_completions):
        trainer.train(resume_from_checkpoint=str(start.checkpoint) if start.checkpoint else None)
    return TrainResult(run_dir, None, trainer.state.global_step, {}, main_process=False)


# --------------------------------------------------------------------------- train


def _run_context(run: RunSetup) -> RunContext:
    config = run.config
    return RunContext(
        run_dir=run.run_dir,
        recorder=run.recorder,
        tracker=run.tracker,
        tokenizer=run.tokenizer,
        permanent_steps=set(config.trainer.permanent_steps),
        config_hash=run.identity.config_hash,
        base_model=run.identity.base_model,
        registered_model_name=config.registered_model,
        version_tags=run.identity.version_tags(run.tracker.run_id),
        log_tables=config.tracking.log_generation_tables,
        describe_version=run.identity.version_description,
        alarm=config.alarm,
        probe=_truncation_probe(run),
    )


def _truncation_probe(run: RunSetup) -> TruncationProbe | None:
    """The alarm's truncation probe, with the run's tokenizer, verifier and prompt metadata; None when off."""
    config = run.config
    if not (config.alarm.enabled and config.alarm.probe.samples):
        return None
    metadata = dict(zip(run.dataset["id"], run.dataset["metadata_json"], strict=True))
    return TruncationProbe(config.alarm.probe, run.tokenizer, run.pipeline, metadata,
                           config.rewards.think_open, config.rewards.think_close)


def _trainer(run: RunSetup, context: RunContext, extra_callbacks: list[Any]) -> Any:
    """TRL's GRPOTrainer on the run's policy and prompts, rewarded by the objective, with the
    project's callback first (on resume it first queues what MLflow never received), then the
    console progress lines in place of the Trainer's own printing."""
    callback = RunCallback(context)
    if run.start.step is not None:
        callback.catch_up(event_log(run.run_dir), run.start.step)
    callbacks = [callback, training_progress(run.config, lambda: callback.last_row), *extra_callbacks]
    return _grpo_trainer(run.config, run.model, run.tokenizer, run.dataset, run.pipeline, run.recorder, run.run_dir,
                         callbacks)


def _grpo_trainer(config: ExperimentConfig, model: Any, tokenizer: Any, dataset: Any, pipeline: RewardPipeline,
                  recorder: GenerationRecorder, run_dir: Path, callbacks: list[Any]) -> Any:
    """TRL's GRPOTrainer rewarded by the objective over the run's pipeline, its records into the recorder."""
    reward = ObjectiveReward.of(pipeline, recorder, JudgeOptions.of(config.rewards, "strict").judge,
                                count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return grpo_trainer(config, model, tokenizer, dataset, reward, run_dir, callbacks)


def _train(run: RunSetup, trainer: Any) -> None:
    """TRL's loop, from the resumable checkpoint when resuming. A failure (an interrupt included)
    marks run.json and the MLflow run failed before it propagates."""
    checkpoint = run.start.checkpoint
    if run.config.tracking.log_system_metrics:
        run.tracker.start_system_metrics(resumed=checkpoint is not None)
    try:
        with completion_only_head(run.config.trainer.head_on_completions):
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except BaseException as error:
        with suppress(OSError):  # a full disk may refuse this too; the previous run.json stays whole
            write_json(run.run_dir / "run.json", {**run.info, "status": "failed"})
        run.tracker.end("FAILED")
        if is_no_space(error, run.run_dir):
            raise UserError(no_space_problem(run.run_dir)) from None
        raise


# --------------------------------------------------------------------------- finish


def _finish(run: RunSetup, final_step: int, seconds: float, metrics_out: Path | None) -> TrainResult:
    """The summary (train.json; in MLflow `summary/train.json` and the run's description, not
    single-point metrics, so the run's charts are its curves), run.json's final state and the curve."""
    final = summarise_curve(run.recorder.metrics_rows(), final_step, seconds)
    run.tracker.log_dict(final, "summary/train.json")
    run.tracker.update_description("Training", train_description(final, run.identity))
    run.tracker.end("FINISHED")
    info = {
        **without_registered_versions(run.info),
        "status": "finished",
        "final_step": final_step,
        "tracking_pending": not run.tracker.online or run.info.get("tracking_pending", False),
        "checkpoint_artifacts": _checkpoint_artifacts(run.run_dir),
        "permanent_steps": permanent_steps(run.run_dir),
    }
    write_json(run.run_dir / "run.json", info)
    write_run_signals(run.run_dir)
    if metrics_out is not None:
        # the DVC metrics file says which machine made it (its timings depend on it), as eval.json does
        write_json(metrics_out / "train.json", {**final, MACHINE_KEY: machine_record()})
        write_curve(run.recorder.metrics_rows(), metrics_out / "train_curve.csv")
    return TrainResult(run.run_dir, run.tracker.run_id, final_step, final)


def _checkpoint_artifacts(run_dir: Path) -> dict[str, str | None]:
    """Step -> artifact folder in the MLflow run (null until `hackable-rl sync` delivers it) of every
    permanent checkpoint still in the run, across all the processes that trained it: the event log
    holds the checkpoints of each of them."""
    kept = {str(step) for step in permanent_steps(run_dir)}
    return {step: path for step, path in checkpoint_artifacts(event_log(run_dir)).items() if step in kept}


