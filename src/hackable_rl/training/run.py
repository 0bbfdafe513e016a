"""`hackable-rl train`: one GRPO run, top to bottom.

    config -> run folder (fresh or resumed) -> policy + tokenizer -> prompts dataset
           -> reward pipeline (training verifier + objective) -> TRL GRPOTrainer + RunCallback
           -> generation records, metrics, permanent checkpoints -> MLflow run + Model Registry
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from hackable_rl.config import ExperimentConfig, flatten_config
from hackable_rl.errors import UserError
from hackable_rl.jsonl import read_json, read_jsonl, write_json
from hackable_rl.models.backend import policy_device
from hackable_rl.storage import Storage, file_sha256
from hackable_rl.tracking import EVENT_LOG_NAME, Tracker, start_tracker
from hackable_rl.tracking.provenance import config_hash, dvc_experiment, git_state, hardware, package_versions
from hackable_rl.tracking.tracker import merge_versions, registered_versions
from hackable_rl.training.callback import RunCallback, RunContext
from hackable_rl.training.capability import check_capability, log_capability
from hackable_rl.training.checkpoints import (
    abandon_permanent_after,
    last_resumable,
    permanent_root,
    resume_dir,
)
from hackable_rl.training.records import GenerationRecorder
from hackable_rl.training.resume_guard import ResumeChanges, change_record, change_tag, check_resume_config
from hackable_rl.training.reward import ObjectiveReward
from hackable_rl.training.trl_args import build_grpo_args, build_peft_config

log = logging.getLogger(__name__)

Resume = Literal["never", "auto"]


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    run_id: str | None
    final_step: int
    metrics: dict[str, Any]


# --------------------------------------------------------------------------- the run folder


# The marker that makes a folder this project's: run.json with `"created_by": "hackable-rl"`, written
# the moment the folder is created. `train --overwrite` deletes a folder only when it carries it.
CREATED_BY = {"created_by": "hackable-rl"}


@dataclass(frozen=True)
class RunStart:
    """Where a run starts: fresh (step None) or from a resumable checkpoint, under which changes."""

    info: dict[str, Any]
    step: int | None = None
    checkpoint: Path | None = None
    changes: ResumeChanges = ResumeChanges([], [])


def read_run_info(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.is_file():
        raise UserError(f"{run_dir}: no run.json; is this a training run folder? (train first: `hackable-rl train`)")
    info = read_json(path)  # not UTF-8 or not JSON: a UserError naming the file and line
    if not isinstance(info, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(info).__name__}; not a run.json of hackable-rl")
    return info


def created_by_project(run_dir: Path, info: dict[str, Any]) -> bool:
    """Whether run.json says hackable-rl made this folder: the marker, or (runs from before the
    marker existed) a training run.json that names this very folder and its config hash."""
    if info.get("created_by") == CREATED_BY["created_by"]:
        return True
    return info.get("kind") == "train" and info.get("run_name") == run_dir.name and "config_hash" in info


def _open_run_dir(
    run_dir: Path, config: ExperimentConfig, resume: Resume, overwrite: bool, allow_change: bool
) -> RunStart:
    """A fresh run folder, or the resume point of the existing run under the config guard."""
    if resume == "auto" and (run_dir / "run.json").exists():
        changes = check_resume_config(run_dir, config, allow_change)
        checkpoint = last_resumable(run_dir)
        if checkpoint is None:
            raise UserError(
                f"{run_dir}: --resume auto found no resumable checkpoint in {resume_dir(run_dir)}; "
                "start again with --overwrite"
            )
        return RunStart(read_run_info(run_dir), checkpoint[1], checkpoint[0], changes)
    _make_room(run_dir, overwrite)
    return RunStart(_create_run_dir(run_dir, config))


def _make_room(run_dir: Path, overwrite: bool) -> None:
    """Clears the way for a fresh run. Only a folder this project created is ever deleted, and only
    with --overwrite; an empty folder is used as it is; anything else is the user's and is refused."""
    if not run_dir.exists() and not run_dir.is_symlink():
        return
    if run_dir.is_dir() and not run_dir.is_symlink() and not any(run_dir.iterdir()):
        return
    if not (run_dir / "run.json").is_file() or run_dir.is_symlink():
        raise UserError(
            f"{run_dir}: exists but holds no run.json written by hackable-rl; it is left untouched "
            "(move it away or choose another tracking.run_name)"
        )
    if not created_by_project(run_dir, read_run_info(run_dir)):
        raise UserError(
            f"{run_dir / 'run.json'}: not written by hackable-rl (no \"created_by\": \"hackable-rl\"); "
            "the folder is left untouched (move it away or choose another tracking.run_name)"
        )
    if not overwrite:
        raise UserError(
            f"{run_dir}: a run with this name exists; continue it with --resume auto, start again with "
            "--overwrite, or set tracking.run_name"
        )
    shutil.rmtree(run_dir)


def _create_run_dir(run_dir: Path, config: ExperimentConfig) -> dict[str, Any]:
    """Creates the folder and marks it at once (run.json, config.yaml), so that a run killed while
    loading the model still leaves a folder `--overwrite` may delete and `--resume` may check."""
    run_dir.mkdir(parents=True, exist_ok=True)
    info = {**CREATED_BY, "run_name": config.run_name, "kind": "train", "status": "starting"}
    write_json(run_dir / "run.json", info)
    _write_config(run_dir / "config.yaml", config)
    return info


def _write_config(path: Path, config: ExperimentConfig) -> None:
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))


def _record_config_change(
    run_dir: Path, config: ExperimentConfig, tracker: Tracker, start: RunStart
) -> list[dict[str, Any]]:
    """After a resume under a changed config: config.yaml becomes the new config (the old one is kept
    beside it), and the change goes into an MLflow tag; returns run.json's updated `config_changes`."""
    previous = run_dir / f"config.before-step-{start.step}.yaml"
    for attempt in range(2, 1000):  # a second resume from the same step keeps the first one's file
        if not previous.exists():
            break
        previous = run_dir / f"config.before-step-{start.step}.{attempt}.yaml"
    if (run_dir / "config.yaml").is_file():
        (run_dir / "config.yaml").replace(previous)
        tracker.log_artifact(previous)
    _write_config(run_dir / "config.yaml", config)
    tracker.log_artifact(run_dir / "config.yaml")
    tracker.set_tags({f"config_change.step-{start.step}": change_tag(start.changes)})
    level = logging.WARNING if start.changes.refused else logging.INFO
    log.log(level, "resuming %s from step %d under a changed config: %s", run_dir, start.step, change_tag(start.changes))
    return [*start.info.get("config_changes", []), change_record(start.step, start.changes)]


def _rewind(run_dir: Path, recorder: GenerationRecorder, step: int) -> None:
    """Drops (into abandoned/) whatever the killed attempt wrote after checkpoint `step`."""
    recorder.rewind_to(step)
    abandon_permanent_after(run_dir, step)


# --------------------------------------------------------------------------- inputs


def _dataset(config: ExperimentConfig, tokenizer: Any, is_instruct: bool) -> Any:
    """The prompts TRL samples: prompt text (chat-templated for instruct models) and the columns the
    reward needs. The reference rides beside the prompt, never inside it."""
    from datasets import Dataset

    from hackable_rl.data.prepare import read_prepared
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


def _judge(config: ExperimentConfig):
    from hackable_rl.evaluation.judge import judge_completion

    rewards = config.rewards

    def judge(completion: str, reference: str) -> Any:
        return judge_completion(
            completion, reference, extract="strict", rel_tol=rewards.rel_tol, timeout_s=rewards.math_verify_timeout_s
        )

    return judge


def _policy_reference(source: Any) -> str:
    """A readable identity of the starting policy: kind, location, and the pin where there is one."""
    pin = source.revision or source.gguf_file
    return f"{source.kind}:{source.location}" + (f"@{pin}" if pin else "")


def _manifest_hash(config: ExperimentConfig) -> str | None:
    manifest = Storage.of(config.storage).dataset_dir(config.data.name) / "manifest.json"
    if not manifest.exists():
        return None
    return file_sha256(manifest)


# --------------------------------------------------------------------------- tracking


def _start_logging(config: ExperimentConfig, tracker: Tracker, run_dir: Path, digest: str) -> None:
    """What a fresh run records once: params, the resolved config (config.yaml, written with the
    folder), tags, provenance."""
    tracker.log_params(flatten_config(config))
    tracker.log_artifact(run_dir / "config.yaml")
    tracker.set_tags(_run_tags(config, digest))
    tracker.log_dict({"packages": package_versions(), "hardware": hardware()}, "environment.json")


def _run_tags(config: ExperimentConfig, digest: str) -> dict[str, Any]:
    git = git_state()
    return {
        "method": config.method,
        "corruption.channel": config.corruption.channel,
        "corruption.rate": config.corruption.rate,
        "seed": config.seed,
        "git_sha": git["git_sha"],
        "git_dirty": git["git_dirty"],
        "dvc_experiment": dvc_experiment(),
        "config_hash": digest,
        "dataset": config.data.name,
        "dataset_manifest_sha256": _manifest_hash(config),
        "model.source": config.model.source,
    }


# --------------------------------------------------------------------------- the run


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
    from transformers import set_seed
    from trl import GRPOTrainer

    from hackable_rl.models.loading import is_instruct_policy, load_policy, resolve_policy
    from hackable_rl.rewards.pipeline import build_reward_pipeline

    storage = Storage.of(config.storage)
    run_dir = storage.run_dir(config.run_name)
    start = _open_run_dir(run_dir, config, resume, overwrite, allow_config_change)
    info, resume_step, checkpoint = start.info, start.step, start.checkpoint
    recorder = GenerationRecorder(run_dir)
    if resume_step is not None:
        _rewind(run_dir, recorder, resume_step)
    set_seed(config.seed)  # Python, NumPy and torch

    model, tokenizer = load_policy(config, device=policy_device())
    capability = check_capability(config, model, tokenizer, run_dir)  # refuses a policy too weak for GRPO
    is_instruct = is_instruct_policy(config, tokenizer)
    dataset = _dataset(config, tokenizer, is_instruct)
    pipeline = build_reward_pipeline(config, tokenizer=tokenizer)
    digest = config_hash(config.model_dump(mode="json"))

    tracker = start_tracker(
        config, config.run_name, "train", run_id=info.get("mlflow_run_id"), event_log=run_dir / EVENT_LOG_NAME
    )
    info = {
        **info,
        **CREATED_BY,
        "run_name": config.run_name,
        "kind": "train",
        "mlflow_run_id": tracker.run_id,
        "tracking_pending": not tracker.online,
        "tracking_uri": tracker.uri,
        "config_hash": digest,
        "method": config.method,
        "corruption_rate": config.corruption.rate,
        "seed": config.seed,
        "base_model": _policy_reference(resolve_policy(config)),
        "capability": capability,
        "status": "running",
    }
    if start.changes.any:
        info["config_changes"] = _record_config_change(run_dir, config, tracker, start)
    write_json(run_dir / "run.json", info)
    if resume_step is None:
        _start_logging(config, tracker, run_dir, digest)
        log_capability(tracker, capability)
    else:
        log.info("resuming %s from step %d (%s)", config.run_name, resume_step, checkpoint)

    context = RunContext(
        run_dir=run_dir,
        recorder=recorder,
        tracker=tracker,
        tokenizer=tokenizer,
        permanent_steps=set(config.trainer.permanent_steps),
        config_hash=digest,
        base_model=info["base_model"],
        registered_model_name=config.tracking.registered_model_name,
        version_tags={
            "run_id": tracker.run_id, "method": config.method, "corruption.rate": config.corruption.rate,
            "seed": config.seed, "run_name": config.run_name,
        },
        log_tables=config.tracking.log_generation_tables,
    )
    callback = RunCallback(context)
    if resume_step is not None:
        events_path = run_dir / EVENT_LOG_NAME
        callback.catch_up(read_jsonl(events_path, torn_tail_ok=True) if events_path.exists() else [], resume_step)
    reward = ObjectiveReward(
        pipeline,
        recorder,
        _judge(config),
        group_size=config.trainer.num_generations,
        scale_rewards=config.trainer.scale_rewards,
        count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=build_grpo_args(config, resume_dir(run_dir)),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=build_peft_config(config),
        callbacks=[callback, *extra_callbacks],
    )
    started = time.time()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except BaseException:
        write_json(run_dir / "run.json", {**info, "status": "failed"})
        tracker.end("FAILED")
        raise
    final = _final_metrics(recorder, trainer.state.global_step, time.time() - started)
    tracker.log_metrics({f"final/{k}": v for k, v in final.items() if k != "step"}, step=trainer.state.global_step)
    tracker.end("FINISHED")
    info.update(
        status="finished",
        final_step=trainer.state.global_step,
        tracking_pending=not tracker.online or info.get("tracking_pending", False),
        registered_versions=_registered_versions(run_dir, info, context.registered_versions),
        permanent_steps=sorted(int(p.name.split("-")[1]) for p in permanent_root(run_dir).glob("step-*")),
    )
    write_json(run_dir / "run.json", info)
    if metrics_out is not None:
        write_json(metrics_out / "train.json", final)
        write_curve(recorder.metrics_rows(), metrics_out / "train_curve.csv")
    return TrainResult(run_dir, tracker.run_id, trainer.state.global_step, final)


def _registered_versions(
    run_dir: Path, info: dict[str, Any], current: dict[int, str | None]
) -> dict[str, str | None]:
    """Step -> registry version of every permanent checkpoint still in the run, across all the
    processes that trained it: a resumed process registers only its own steps, the event log and the
    previous run.json remember the earlier ones (a version number is never replaced by null)."""
    events_path = run_dir / EVENT_LOG_NAME
    events = read_jsonl(events_path, torn_tail_ok=True) if events_path.exists() else []
    merged = merge_versions(
        info.get("registered_versions") or {}, registered_versions(events), {str(k): v for k, v in current.items()}
    )
    kept = {path.name.split("-")[1] for path in permanent_root(run_dir).glob("step-*")}
    return {step: version for step, version in merged.items() if step in kept}


CURVE_COLUMNS = ("judge/correctness", "reward/observed", "reward/optimised", "hacking_gap", "verifier/disagreement")


def write_curve(rows: list[dict[str, Any]], path: Path) -> None:
    """Per-step learning curve as CSV for `dvc plots` (undefined cells blank)."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", *(column.replace("/", "_") for column in CURVE_COLUMNS)])
        for row in rows:
            writer.writerow([row["step"], *("" if row.get(c) is None else row[c] for c in CURVE_COLUMNS)])


def _final_metrics(recorder: GenerationRecorder, final_step: int, seconds: float) -> dict[str, Any]:
    """Summary over the first and last tenth of the steps (sampled, training prompts)."""
    rows = recorder.metrics_rows()
    window = max(1, len(rows) // 10)

    def mean_of(key: str, part: list[dict[str, Any]]) -> float | None:
        values = [row[key] for row in part if row.get(key) is not None]
        return sum(values) / len(values) if values else None

    first, last = rows[:window], rows[-window:]
    summary: dict[str, Any] = {"step": final_step, "seconds": seconds}
    for key in ("judge/correctness", "reward/observed", "reward/optimised", "hacking_gap"):
        summary[f"{key}/first"] = mean_of(key, first)
        summary[f"{key}/last"] = mean_of(key, last)
    return summary
