"""The `warmstart` stage: worked solutions -> SFT -> greedy validation accuracy -> metrics and MLflow.

`run_warmstart` takes one of three paths:
- the tiny model (`train_tiny_policy`): a tokenizer trained on the prepared texts, a fresh model,
  SFT, then greedy held-out accuracy; saved under `policy_dir(config)`;
- a pretrained source with `warmstart.pretrained_sft` (`finetune_pretrained_policy`): the same SFT
  and measurement from the pretrained weights, saved as a safetensors folder with its reference.json;
- any other pretrained source (`record_pretrained_reference`): nothing is trained; the stage records
  what the source is and the sha256 of its weights.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.jsonl import write_json
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.models.backend import choose_attention
from hackable_rl.models.loading import (
    TINY,
    format_prompt,
    is_instruct_policy,
    load_source_policy,
    policy_dir,
    resolve_source,
    uses_pretrained_sft,
)
from hackable_rl.models.reference import pretrained_reference, save_reference
from hackable_rl.models.tiny import build_tiny_model
from hackable_rl.models.tokenizer import train_tokenizer
from hackable_rl.tracking import Tracker, open_tracker
from hackable_rl.warmstart.accuracy import greedy_accuracy
from hackable_rl.warmstart.data import (
    SftExample,
    dataset_file,
    load_sft_examples,
    tokenizer_corpus,
    train_file,
)
from hackable_rl.warmstart.sft import StepCallback, encode_examples, sft_steps
from hackable_rl.warmstart.sft_metrics import flat_numbers, sft_metrics, warn_if_outside, weight_config

__all__ = ["METRICS_PATH", "run_warmstart", "train_tiny_policy", "finetune_pretrained_policy",
           "record_pretrained_reference"]

log = logging.getLogger(__name__)

METRICS_PATH = Path("metrics") / "warmstart.json"
_LOG_EVERY = 10  # steps between MLflow loss points
_PRINT_EVERY = 50  # steps between log lines (the progress bar is invisible in DVC/CI logs)
_POLICY_RECORD_KEYS = ("steps", "seed", "config_hash", "accuracy", "accuracy_by_difficulty", "in_target")


def run_warmstart(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """Warm-starts the tiny model, fine-tunes a pretrained one (`warmstart.pretrained_sft`), or
    records the pretrained reference; returns the stage metrics."""
    if config.model.source == TINY:
        return train_tiny_policy(config, metrics_path)
    if uses_pretrained_sft(config):
        return finetune_pretrained_policy(config, metrics_path)
    return record_pretrained_reference(config, metrics_path)


# --------------------------------------------------------------------------- the tiny policy


def train_tiny_policy(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """Tokenizer, model, SFT, greedy held-out accuracy; saves the policy and writes the metrics."""
    started = time.perf_counter()
    examples = load_sft_examples(dataset_file(config, "sft.jsonl"))
    eval_path = dataset_file(config, "validation.jsonl")  # never test: the band is a development check
    tokenizer = train_tokenizer(tokenizer_corpus(examples, train_file(config)), config.model.tiny.vocab_size)
    torch.manual_seed(config.warmstart_seed)  # the model's initial weights
    model = build_tiny_model(config.model.tiny, tokenizer, choose_attention(config, "cpu"))
    encoded = encode_examples(tokenizer, examples, config.model.tiny.max_position_embeddings)
    target = policy_dir(config)
    log.info(
        "warm start: %d worked solutions, %d steps, %.2fM parameters -> %s",
        len(examples), config.warmstart.steps, model.num_parameters() / 1e6, target,
    )
    with _sft_run(config, target, {"hackable_rl.model_source": TINY}) as tracker:
        losses = sft_steps(model, encoded, config, tokenizer.pad_token_id, _step_logger(config, tracker, _PRINT_EVERY))
        train_seconds = time.perf_counter() - started
        accuracy = greedy_accuracy(model, tokenizer, eval_path, config)
        metrics = sft_metrics(config, model, tokenizer, len(examples), losses, accuracy)
        metrics["seconds"] = {"train": train_seconds, "total": time.perf_counter() - started}
        _save_policy(model, tokenizer, target, metrics)
        write_json(metrics_path, {**metrics, MACHINE_KEY: machine_record()})
        tracker.log_metrics(flat_numbers(metrics))
        tracker.log_artifact(metrics_path)
    warn_if_outside(accuracy["accuracy"], config.warmstart.target_accuracy, config.warmstart.steps)
    log.info(
        "warm start: held-out greedy accuracy %s in %.0f s", accuracy["accuracy"], metrics["seconds"]["total"]
    )
    return metrics


# --------------------------------------------------------------------------- a fine-tuned pretrained policy


def finetune_pretrained_policy(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """`warmstart.pretrained_sft`: SFT of the pretrained source on the worked solutions, greedy
    validation accuracy, then the policy saved as a plain safetensors folder (with its tokenizer and
    the source's reference.json) that GRPO, the capability gate and evaluation load.

    A pretrained instruct model has never seen the strict `<think></think> \\boxed{}` format (SmolLM2-135M
    writes it in none of 64 samples); a few dozen steps of worked solutions teach it, so GRPO groups
    carry signal. The weights stay float32 (on CUDA too): a bf16 copy would lose small updates.
    """
    started = time.perf_counter()
    examples = load_sft_examples(dataset_file(config, "sft.jsonl"))
    eval_path = dataset_file(config, "validation.jsonl")  # never test: the band is a development check
    reference = pretrained_reference(config, resolve_source(config))
    model, tokenizer = load_source_policy(config)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    instruct = is_instruct_policy(config, tokenizer)
    formatted = [SftExample(format_prompt(tokenizer, e.prompt, instruct), e.completion) for e in examples]
    encoded = encode_examples(tokenizer, formatted, model.config.max_position_embeddings)
    target = policy_dir(config)
    log.info(
        "warm start of %s: %d worked solutions, %d steps of %d, lr %.1e -> %s",
        config.model.source, len(examples), config.warmstart.steps, config.warmstart.batch_size,
        config.warmstart.learning_rate, target,
    )
    tags = {"hackable_rl.model_source": config.model.source, "hackable_rl.pretrained_sft": True}
    with _sft_run(config, target, tags) as tracker:
        tracker.log_dict(reference, "reference.json")
        # A pretrained model's steps are few and slow: every one gets a log line.
        losses = sft_steps(model, encoded, config, tokenizer.pad_token_id, _step_logger(config, tracker, 1))
        train_seconds = time.perf_counter() - started
        accuracy = greedy_accuracy(model, tokenizer, eval_path, config, instruct)
        metrics = sft_metrics(config, model, tokenizer, len(examples), losses, accuracy)
        metrics.update(trained=True, reference=reference)
        metrics["seconds"] = {"train": train_seconds, "total": time.perf_counter() - started}
        _save_policy(model, tokenizer, target, metrics)
        save_reference(reference, target)
        write_json(metrics_path, {**metrics, MACHINE_KEY: machine_record()})
        tracker.log_metrics(flat_numbers({k: v for k, v in metrics.items() if k != "reference"}))
        tracker.log_artifact(metrics_path)
    warn_if_outside(accuracy["accuracy"], config.warmstart.target_accuracy, config.warmstart.steps)
    log.info(
        "warm start of %s: validation greedy accuracy %s in %.0f s",
        config.model.source, accuracy["accuracy"], metrics["seconds"]["total"],
    )
    return metrics


# --------------------------------------------------------------------------- a pretrained reference


def record_pretrained_reference(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """For a pretrained source: writes `<policy_dir>/reference.json` (source, revision, file hashes)."""
    started = time.perf_counter()
    source = resolve_source(config)
    reference = pretrained_reference(config, source)
    target = policy_dir(config)
    reference_path = save_reference(reference, target)
    metrics = {
        "source": config.model.source,
        "trained": False,
        "reference": reference,
        "seconds": {"total": time.perf_counter() - started},
    }
    write_json(metrics_path, {**metrics, MACHINE_KEY: machine_record()})
    with _stage_run(config, target) as tracker:
        tracker.set_tags({"hackable_rl.model_source": config.model.source, "hackable_rl.model_kind": source.kind})
        tracker.log_params(
            {"model.source": config.model.source, "model.revision": source.revision, "model.gguf_file": source.gguf_file}
        )
        tracker.log_dict(reference, "reference.json")
    log.info("pretrained policy %s: reference recorded in %s", config.model.source, reference_path)
    return metrics


# --------------------------------------------------------------------------- tracking and outputs


def _stage_run(config: ExperimentConfig, target: Path) -> AbstractContextManager[Tracker]:
    """The stage's MLflow run (tracking off: only its local event log)."""
    return open_tracker(config, run_name=f"warmstart-{target.name}", kind="warmstart")


@contextmanager
def _sft_run(config: ExperimentConfig, target: Path, tags: dict[str, Any]) -> Iterator[Tracker]:
    """The stage's run for an SFT path, tagged, with the weight-determining config as its params."""
    with _stage_run(config, target) as tracker:
        tracker.set_tags(tags)
        tracker.log_params(flatten_config(weight_config(config)))
        yield tracker


def _step_logger(config: ExperimentConfig, tracker: Tracker, print_every: int) -> StepCallback:
    """Loss and learning rate to MLflow every `_LOG_EVERY` steps (and the last), to the log every
    `print_every` steps."""
    steps = config.warmstart.steps

    def on_step(step: int, loss: float, lr: float) -> None:
        if step % _LOG_EVERY == 0 or step == steps - 1:
            tracker.log_metrics({"warmstart/loss": loss, "warmstart/lr": lr}, step=step)
        if step % print_every == 0:
            log.info("warm start step %d/%d: loss %.4f, lr %.2e", step, steps, loss, lr)

    return on_step


def _save_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, target: Path, metrics: dict[str, Any]
) -> None:
    """The policy folder: safetensors weights, tokenizer, and a warmstart.json naming how it was made."""
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)  # safetensors (transformers 5 writes nothing else)
    tokenizer.save_pretrained(target)
    write_json(target / "warmstart.json", {key: metrics[key] for key in _POLICY_RECORD_KEYS})
