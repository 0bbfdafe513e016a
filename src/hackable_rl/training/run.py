"""`hackable-rl train`: one GRPO run, top to bottom.

    config -> run folder (fresh or resumed) -> policy + tokenizer -> prompts dataset
           -> reward pipeline (training verifier + objective) -> TRL GRPOTrainer + RunCallback
           -> generation records, metrics, permanent checkpoints -> MLflow run (the checkpoints as
              artifacts: `hackable-rl eval --run-id` registers the ones it evaluates)

`run_training` reads as set up (`_set_up`), train (`_trainer`, `_train`) and finish (`_finish`).
The run folder itself (run.json, config.yaml, `--overwrite`, `--resume`) is `training.run_dir`.
Launched as several processes, the main one does all of that and the others only train
(`_train_beside_main`, `training.ranks`).
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_json
from hackable_rl.core.numerics import DISPATCH_VARIABLE, dispatch_record
from hackable_rl.core.run_lock import run_lock
from hackable_rl.core.storage import Storage
from hackable_rl.data.prepare import read_prepared
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.models.backend import policy_device
from hackable_rl.payoff.table import own_cell_payoff, write_payoff
from hackable_rl.reward.pipeline import ObjectiveReward, RewardPipeline, build_reward_pipeline
from hackable_rl.tracking import EVENT_LOG_NAME, Tracker, start_tracker
from hackable_rl.tracking.descriptions import train_description
from hackable_rl.tracking.provenance import dataset_input, hardware, package_versions
from hackable_rl.tracking.rewind import forget_steps_after
from hackable_rl.tracking.versions import checkpoint_artifacts, without_registered_versions
from hackable_rl.training.alarm import write_run_signals
from hackable_rl.training.callback import RunCallback, RunContext
from hackable_rl.training.capability import check_capability, log_capability
from hackable_rl.training.checkpoints import abandon_permanent_after, permanent_steps
from hackable_rl.training.console import training_progress
from hackable_rl.training.curves import summarise_curve, write_curve
from hackable_rl.training.disk_full import is_no_space, no_space_problem
from hackable_rl.training.identity import RunIdentity
from hackable_rl.training.ranks import Ranks, process_ranks
from hackable_rl.training.recorder import GenerationRecorder
from hackable_rl.training.run_dir import (
    CREATED_BY,
    Resume,
    RunStart,
    open_run_dir,
    record_config_change,
    refuse_foreign,
)
from hackable_rl.training.stop_signal import stop_on_signals, stopped
from hackable_rl.training.trainer import check_lora_targets, completion_only_head, grpo_trainer
from hackable_rl.training.truncation_probe import TruncationProbe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    run_id: str | None
    final_step: int
    metrics: dict[str, Any]
    main_process: bool = True
    """False in the other processes of a multi-process run: they report nothing of their own."""


@dataclass(frozen=True)
class _Run:
    """What set-up hands to training and finishing."""

    config: ExperimentConfig
    run_dir: Path
    start: RunStart
    recorder: GenerationRecorder
    identity: RunIdentity
    tracker: Tracker
    info: dict[str, Any]  # run.json as set-up wrote it (status "running")
    model: Any
    tokenizer: Any
    dataset: Any  # datasets.Dataset of prompts (`_dataset`)
    pipeline: Any  # the reward pipeline: training verifier + objective


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
        run = _set_up(config, resume, overwrite, allow_config_change, ranks)
        context = _run_context(run)
        with stop_on_signals() as stop:  # SIGTERM/SIGINT: the step ends, a resumable checkpoint, then stop
            trainer = _trainer(run, context, [*extra_callbacks, stop])
            started = time.time()
            _train(run, trainer)
        if stop.received is not None and trainer.state.global_step < config.trainer.max_steps:
            stopped(run.run_dir, run.info, run.tracker, trainer.state.global_step, config.trainer.max_steps, stop.received)
        return _finish(run, trainer.state.global_step, time.time() - started, metrics_out)


# --------------------------------------------------------------------------- set up


def _set_up(config: ExperimentConfig, resume: Resume, overwrite: bool, allow_change: bool, ranks: Ranks) -> _Run:
    """The run folder (fresh, or rewound to its resume point), the policy and what it trains on, the
    run's identity, and the tracker, started only once all of those have loaded."""
    from hackable_rl.models.loading import resolve_policy

    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    start = ranks.share(open_run_dir(run_dir, config, resume, overwrite, allow_change))
    recorder = GenerationRecorder(run_dir, gather=ranks.gather)
    if start.step is not None:
        _rewind(run_dir, recorder, start.step)

    model, tokenizer, dataset = _policy_and_prompts(config)
    capability = check_capability(config, model, tokenizer, run_dir)  # refuses a policy too weak for GRPO
    pipeline = build_reward_pipeline(config, tokenizer=tokenizer)
    identity = RunIdentity.of(config, resolve_policy(config))

    tracker = start_tracker(
        config, config.run_name, "train", run_id=start.info.get("mlflow_run_id"), event_log=run_dir / EVENT_LOG_NAME
    )
    if start.step is not None:  # MLflow forgets the steps after the resume point (a corrupt checkpoint's fallback)
        forget_steps_after(tracker, _event_log(run_dir), start.step)
    info = _record_start(config, run_dir, start, identity, tracker, capability, pipeline)
    return _Run(config, run_dir, start, recorder, identity, tracker, info, model, tokenizer, dataset, pipeline)


def _policy_and_prompts(config: ExperimentConfig) -> tuple[Any, Any, Any]:
    """The seeded policy, its tokenizer and the prompts dataset: what every training process loads."""
    from transformers import set_seed

    from hackable_rl.models.loading import is_instruct_policy, load_policy

    set_seed(config.seed)  # Python, NumPy and torch
    model, tokenizer = load_policy(config, device=policy_device())
    check_lora_targets(config, model)
    return model, tokenizer, _dataset(config, tokenizer, is_instruct_policy(config, tokenizer))


def _train_beside_main(config: ExperimentConfig, ranks: Ranks, extra_callbacks: list[Any]) -> TrainResult:
    """A process other than the main one: the main process's run start (its resume point), the same
    policy and prompts, and TRL's loop with no callback of the project's. Its generation records go
    to the main process (`Ranks.gather`); it writes nothing to the run folder or MLflow itself."""
    start = ranks.share(None)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    model, tokenizer, dataset = _policy_and_prompts(config)
    pipeline = build_reward_pipeline(config, tokenizer=tokenizer)
    recorder = GenerationRecorder(run_dir, gather=ranks.gather)
    trainer = _grpo_trainer(config, model, tokenizer, dataset, pipeline, recorder, run_dir, list(extra_callbacks))
    with completion_only_head(config.trainer.head_on_completions):
        trainer.train(resume_from_checkpoint=str(start.checkpoint) if start.checkpoint else None)
    return TrainResult(run_dir, None, trainer.state.global_step, {}, main_process=False)


def _rewind(run_dir: Path, recorder: GenerationRecorder, step: int) -> None:
    """Drops (into abandoned/) whatever the killed attempt wrote after checkpoint `step`."""
    recorder.rewind_to(step)
    abandon_permanent_after(run_dir, step)


def _dataset(config: ExperimentConfig, tokenizer: Any, is_instruct: bool) -> Any:
    """The prompts TRL samples: prompt text (chat-templated for instruct models) and the columns the
    reward needs. The reference rides beside the prompt, never inside it."""
    from datasets import Dataset

    from hackable_rl.models.loading import format_prompt

    rows = read_prepared(config, "train")
    return Dataset.from_list(
        [
            {
                "prompt": format_prompt(tokenizer, row["prompt"], is_instruct),
                "id": row["id"],
                "reference": row["reference"],
                "metadata_json": json.dumps(row.get("metadata") or {}),
            }
            for row in rows
        ]
    )


def _record_start(
    config: ExperimentConfig, run_dir: Path, start: RunStart, identity: RunIdentity, tracker: Tracker,
    capability: dict[str, Any] | None, pipeline: RewardPipeline,
) -> dict[str, Any]:
    """Writes run.json of the running run and returns it. A fresh run logs its params, config, tags
    and provenance once; a resumed one records how its config changed, if it did."""
    info = {
        **start.info,
        **CREATED_BY,
        "kind": "train",
        "mlflow_run_id": tracker.run_id,
        "tracking_pending": not tracker.online,
        "tracking_uri": tracker.shown_uri,  # credentials masked: run.json is shared with the run
        **identity.run_info(),
        "capability": capability,
        "status": "running",
    }
    if start.changes.any:
        info["config_changes"] = record_config_change(run_dir, config, tracker, start)
    write_json(run_dir / "run.json", info)
    if start.step is None:
        _start_logging(config, tracker, run_dir, identity, pipeline)
        log_capability(tracker, capability)
    else:
        log.info("resuming %s from step %d (%s)", config.run_name, start.step, start.checkpoint)
    return info


def _start_logging(
    config: ExperimentConfig, tracker: Tracker, run_dir: Path, identity: RunIdentity, pipeline: RewardPipeline
) -> None:
    """What a fresh run records once: params, the resolved config (config.yaml, written with the
    folder), tags, provenance."""
    tracker.log_params(flatten_config(config))
    tracker.log_artifact(run_dir / "config.yaml")
    tracker.set_tags({**identity.tags(), "cpu_dispatch": str(dispatch_record()[DISPATCH_VARIABLE])})
    tracker.log_dict({"packages": package_versions(), "hardware": hardware()}, "environment.json")
    dataset = dataset_input(Storage.of(config.storage).dataset_dir(config.data.name), "train")
    if dataset is not None:
        tracker.log_dataset(**dataset, context="training")
    _log_payoff(config, tracker, run_dir, pipeline)


def _log_payoff(config: ExperimentConfig, tracker: Tracker, run_dir: Path, pipeline: RewardPipeline) -> None:
    """The exploit payoff table of this run's own method, rate and flaw (`hackable-rl payoff`), saved
    before training: what each canonical completion would earn, so a run can be read against it.
    Priced with the run's own reward pipeline, not a second build of it."""
    cells = own_cell_payoff(config, pipeline)
    tracker.log_artifact(write_payoff(run_dir / "payoff.json", cells))


# --------------------------------------------------------------------------- train


def _run_context(run: _Run) -> RunContext:
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


def _truncation_probe(run: _Run) -> TruncationProbe | None:
    """The alarm's truncation probe, with the run's tokenizer, verifier and prompt metadata; None when off."""
    config = run.config
    if not (config.alarm.enabled and config.alarm.probe.samples):
        return None
    metadata = dict(zip(run.dataset["id"], run.dataset["metadata_json"], strict=True))
    return TruncationProbe(config.alarm.probe, run.tokenizer, run.pipeline, metadata,
                           config.rewards.think_open, config.rewards.think_close)


def _trainer(run: _Run, context: RunContext, extra_callbacks: list[Any]) -> Any:
    """TRL's GRPOTrainer on the run's policy and prompts, rewarded by the objective, with the
    project's callback first (on resume it first queues what MLflow never received), then the
    console progress lines in place of the Trainer's own printing."""
    callback = RunCallback(context)
    if run.start.step is not None:
        callback.catch_up(_event_log(run.run_dir), run.start.step)
    callbacks = [callback, training_progress(run.config, lambda: callback.last_row), *extra_callbacks]
    return _grpo_trainer(run.config, run.model, run.tokenizer, run.dataset, run.pipeline, run.recorder, run.run_dir,
                         callbacks)


def _grpo_trainer(config: ExperimentConfig, model: Any, tokenizer: Any, dataset: Any, pipeline: RewardPipeline,
                  recorder: GenerationRecorder, run_dir: Path, callbacks: list[Any]) -> Any:
    """TRL's GRPOTrainer rewarded by the objective over the run's pipeline, its records into the recorder."""
    reward = ObjectiveReward.of(pipeline, recorder, JudgeOptions.of(config.rewards, "strict").judge,
                                count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return grpo_trainer(config, model, tokenizer, dataset, reward, run_dir, callbacks)


def _train(run: _Run, trainer: Any) -> None:
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


def _finish(run: _Run, final_step: int, seconds: float, metrics_out: Path | None) -> TrainResult:
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
        write_json(metrics_out / "train.json", final)
        write_curve(run.recorder.metrics_rows(), metrics_out / "train_curve.csv")
    return TrainResult(run.run_dir, run.tracker.run_id, final_step, final)


def _checkpoint_artifacts(run_dir: Path) -> dict[str, str | None]:
    """Step -> artifact folder in the MLflow run (null until `hackable-rl sync` delivers it) of every
    permanent checkpoint still in the run, across all the processes that trained it: the event log
    holds the checkpoints of each of them."""
    kept = {str(step) for step in permanent_steps(run_dir)}
    return {step: path for step, path in checkpoint_artifacts(_event_log(run_dir)).items() if step in kept}


def _event_log(run_dir: Path) -> list[dict[str, Any]]:
    """The run's tracking events so far (a line torn by a kill is dropped)."""
    path = run_dir / EVENT_LOG_NAME
    return read_jsonl(path, torn_tail_ok=True) if path.exists() else []
