"""A training run set up, before TRL's loop: its folder (fresh, or rewound to its resume point), the
policy and the prompts it trains on, its reward pipeline, identity and tracker, and run.json of the
running run (a fresh run logs its params, config, provenance and own payoff table once).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import set_seed

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.jsonl import read_jsonl, write_json
from hackable_rl.core.numerics import DISPATCH_VARIABLE, dispatch_record
from hackable_rl.core.storage import Storage
from hackable_rl.data.prepare import read_prepared
from hackable_rl.models.backend import policy_device
from hackable_rl.models.loading import format_prompt, is_instruct_policy, load_policy, resolve_policy
from hackable_rl.payoff.table import own_cell_payoff, write_payoff
from hackable_rl.reward.pipeline import RewardPipeline, build_reward_pipeline
from hackable_rl.tracking import EVENT_LOG_NAME, Tracker, start_tracker
from hackable_rl.tracking.provenance import dataset_input, hardware, package_versions
from hackable_rl.tracking.rewind import forget_steps_after
from hackable_rl.training.capability import check_capability, log_capability
from hackable_rl.training.checkpoints import abandon_permanent_after
from hackable_rl.training.identity import RunIdentity
from hackable_rl.training.ranks import Ranks
from hackable_rl.training.recorder import GenerationRecorder
from hackable_rl.training.run_dir import (
    CREATED_BY,
    Resume,
    RunStart,
    open_run_dir,
    record_config_change,
)
from hackable_rl.training.trainer import check_lora_targets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSetup:
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


def set_up(config: ExperimentConfig, resume: Resume, overwrite: bool, allow_change: bool, ranks: Ranks) -> RunSetup:
    """The run folder (fresh, or rewound to its resume point), the policy and what it trains on, the
    run's identity, and the tracker, started only once all of those have loaded."""
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    start = ranks.share(open_run_dir(run_dir, config, resume, overwrite, allow_change))
    recorder = GenerationRecorder(run_dir, gather=ranks.gather)
    if start.step is not None:
        _rewind(run_dir, recorder, start.step)

    model, tokenizer, dataset = policy_and_prompts(config)
    capability = check_capability(config, model, tokenizer, run_dir)  # refuses a policy too weak for GRPO
    pipeline = build_reward_pipeline(config, tokenizer=tokenizer)
    identity = RunIdentity.of(config, resolve_policy(config))

    tracker = start_tracker(
        config, config.run_name, "train", run_id=start.info.get("mlflow_run_id"), event_log=run_dir / EVENT_LOG_NAME
    )
    if start.step is not None:  # MLflow forgets the steps after the resume point (a corrupt checkpoint's fallback)
        forget_steps_after(tracker, event_log(run_dir), start.step)
    info = _record_start(config, run_dir, start, identity, tracker, capability, pipeline)
    return RunSetup(config, run_dir, start, recorder, identity, tracker, info, model, tokenizer, dataset, pipeline)


def policy_and_prompts(config: ExperimentConfig) -> tuple[Any, Any, Any]:
    """The seeded policy, its tokenizer and the prompts dataset: what every training process loads."""
    set_seed(config.seed)  # Python, NumPy and torch
    model, tokenizer = load_policy(config, device=policy_device())
    check_lora_targets(config, model)
    return model, tokenizer, _dataset(config, tokenizer, is_instruct_policy(config, tokenizer))


def _rewind(run_dir: Path, recorder: GenerationRecorder, step: int) -> None:
    """Drops (into abandoned/) whatever the killed attempt wrote after checkpoint `step`."""
    recorder.rewind_to(step)
    abandon_permanent_after(run_dir, step)


def _dataset(config: ExperimentConfig, tokenizer: Any, is_instruct: bool) -> Any:
    """The prompts TRL samples: prompt text (chat-templated for instruct models) and the columns the
    reward needs. The reference rides beside the prompt, never inside it."""
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


def event_log(run_dir: Path) -> list[dict[str, Any]]:
    """The run's tracking events so far (a line torn by a kill is dropped)."""
    path = run_dir / EVENT_LOG_NAME
    return read_jsonl(path, torn_tail_ok=True) if path.exists() else []
