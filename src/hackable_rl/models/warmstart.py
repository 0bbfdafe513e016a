"""The `warmstart` stage: make the tiny policy partly capable before GRPO, or pin a pretrained one.

Tiny model: train a tokenizer on the prepared texts, build the model, supervised fine-tuning on
worked solutions (`sft.jsonl`) for a fixed number of optimiser steps, then greedy held-out accuracy
under the clean checker. The predecessor's pilot started from a policy that scored exactly zero,
which made every comparison meaningless; the stage therefore aims at a band (default 40-70%) that
leaves GRPO headroom, and warns loudly when it misses.

A STEP budget, not a time budget: on CPU the same seed and steps give bit-identical weights.

Pretrained source: nothing is trained; the stage records what the source is and its sha256, so a
run can show which weights it started from. With `warmstart.pretrained_sft` it is fine-tuned on the
worked solutions first (`finetune_pretrained_policy`) and saved as a safetensors folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config import ExperimentConfig, flatten_config
from hackable_rl.data.prompting import render_prompt
from hackable_rl.errors import UserError
from hackable_rl.jsonl import iter_jsonl
from hackable_rl.models.backend import choose_attention
from hackable_rl.models.generation import GenerationSettings, generate_completions, progress_bar
from hackable_rl.models.loading import (
    TINY,
    PolicySource,
    download_hub_snapshot,
    format_prompt,
    is_instruct_policy,
    load_source_policy,
    policy_dir,
    resolve_source,
    uses_pretrained_sft,
)
from hackable_rl.models.tiny import build_tiny_model
from hackable_rl.models.tokenizer import train_tokenizer
from hackable_rl.storage import Storage, file_sha256

__all__ = [
    "SftExample",
    "run_warmstart",
    "train_tiny_policy",
    "record_reference",
    "finetune_pretrained_policy",
    "load_sft_examples",
    "sft_steps",
    "greedy_accuracy",
    "warmstart_config_hash",
]

log = logging.getLogger(__name__)

METRICS_PATH = Path("metrics") / "warmstart.json"
_IGNORE = -100  # label id that cross-entropy skips: prompt tokens and padding carry no loss
_LOG_EVERY = 10  # steps between MLflow loss points
_PRINT_EVERY = 50  # steps between log lines (the progress bar is invisible in DVC/CI logs)


@dataclass(frozen=True)
class SftExample:
    """One worked solution: the prompt the policy sees, and the completion it should write."""

    prompt: str
    completion: str


# --------------------------------------------------------------------------- entry point


def run_warmstart(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """Warm-starts the tiny model, fine-tunes a pretrained one (`warmstart.pretrained_sft`), or
    records the pretrained reference; returns the stage metrics."""
    if config.model.source == TINY:
        return train_tiny_policy(config, metrics_path)
    if uses_pretrained_sft(config):
        return finetune_pretrained_policy(config, metrics_path)
    return record_reference(config, metrics_path)


def warmstart_config_hash(config: ExperimentConfig) -> str:
    """Hash of everything that determines the warm-started weights (seed, data, model, warmstart)."""
    relevant = config.model_dump(mode="json", include={"seed", "data", "model", "warmstart"})
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- data


def _dataset_file(config: ExperimentConfig, name: str) -> Path:
    path = Storage.of(config.storage).dataset_dir(config.data.name) / name
    if not path.exists():
        raise UserError(f"{path}: missing; run `hackable-rl prepare` first (data.name {config.data.name!r})")
    return path


def _prompt_of(path: Path, number: int, row: dict[str, Any]) -> str:
    # Prepared rows carry the rendered prompt; rows written by hand may hold only the question.
    if isinstance(row.get("prompt"), str):
        return row["prompt"]
    if isinstance(row.get("question"), str):
        return render_prompt(row["question"])
    raise UserError(f"{path}:{number}: expected a string `prompt` or `question` field")


def load_sft_examples(path: Path) -> list[SftExample]:
    """Worked solutions from sft.jsonl; a row without a string `solution` is a UserError."""
    examples = []
    for number, row in iter_jsonl(path):
        if not isinstance(row.get("solution"), str) or not row["solution"].strip():
            raise UserError(f"{path}:{number}: expected a non-empty string `solution` (a worked solution)")
        examples.append(SftExample(_prompt_of(path, number, row), row["solution"]))
    if not examples:
        raise UserError(
            f"{path}: no worked solutions; set data.sft_size > 0 and use a provider that has them (arith)"
        )
    return examples


def _tokenizer_corpus(examples: list[SftExample], train_path: Path | None) -> Iterable[str]:
    """The texts the tokenizer learns from: worked solutions and training prompts (never validation or test)."""
    for example in examples:
        yield example.prompt + example.completion
    if train_path is not None:
        for number, row in iter_jsonl(train_path):
            yield _prompt_of(train_path, number, row)


# --------------------------------------------------------------------------- supervised fine-tuning


def encode_examples(
    tokenizer: PreTrainedTokenizerBase, examples: list[SftExample], max_length: int
) -> list[tuple[list[int], int]]:
    """(prompt + completion + eos ids, prompt length) per example.

    Prompt and completion are tokenized apart, as in generation, where the completion starts right
    after the prompt's tokens; tokenizing them together could merge across the boundary.
    """
    encoded, too_long = [], 0
    for example in examples:
        prompt = tokenizer(example.prompt, add_special_tokens=False)["input_ids"]
        completion = tokenizer(example.completion, add_special_tokens=False)["input_ids"]
        ids = prompt + completion + [tokenizer.eos_token_id]
        too_long += len(ids) > max_length
        encoded.append((ids, len(prompt)))
    if too_long:
        longest = max(len(ids) for ids, _ in encoded)
        raise UserError(
            f"model.tiny.max_position_embeddings: {max_length} is shorter than {too_long} worked solutions "
            f"(longest {longest} tokens); raise it or shorten the problems"
        )
    return encoded


def collate(batch: list[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input ids, attention mask, and labels that score completion tokens only."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # [B, T]
    attention = torch.zeros((len(batch), width), dtype=torch.long)  # [B, T]
    labels = torch.full((len(batch), width), _IGNORE, dtype=torch.long)  # [B, T]
    for row, (ids, prompt_length) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        labels[row, prompt_length : len(ids)] = torch.tensor(ids[prompt_length:])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def warmup_cosine(warmup_steps: int, total_steps: int):
    """Learning-rate multiplier: linear warm-up to 1, then cosine decay to 0 at `total_steps`."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return multiplier


def _batch_order(count: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Example indices per step: seeded reshuffles, one epoch after another."""
    generator = torch.Generator().manual_seed(seed)
    order: list[int] = []
    while len(order) < steps * batch_size:
        order.extend(torch.randperm(count, generator=generator).tolist())
    return [order[step * batch_size : (step + 1) * batch_size] for step in range(steps)]


def sft_steps(
    model: PreTrainedModel,
    encoded: list[tuple[list[int], int]],
    config: ExperimentConfig,
    pad_id: int,
    on_step=None,
) -> list[float]:
    """Runs `warmstart.steps` AdamW steps on completion tokens; returns the loss of every step."""
    section = config.warmstart
    optimizer = torch.optim.AdamW(model.parameters(), lr=section.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(section.warmup_steps, section.steps)
    )
    losses = []
    model.train()
    with progress_bar(section.steps, "warm start") as advance:
        for step, indices in enumerate(
            _batch_order(len(encoded), section.batch_size, section.steps, config.seed)
        ):
            batch = collate([encoded[index] for index in indices], pad_id)
            batch = {key: tensor.to(model.device) for key, tensor in batch.items()}
            loss = model(**batch).loss  # mean cross-entropy over completion tokens in the batch
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if on_step is not None:
                on_step(step, losses[-1], schedule.get_last_lr()[0])
            advance()
    model.eval()
    return losses


# --------------------------------------------------------------------------- held-out accuracy


def greedy_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    eval_path: Path,
    config: ExperimentConfig,
    instruct: bool = False,
) -> dict[str, Any]:
    """Greedy accuracy under the clean checker on the first `warmstart.eval_size` held-out rows,
    overall and by `metadata.n_steps` (the arithmetic difficulty). `instruct`: wrap each prompt in the
    tokenizer's chat template, as training does for an instruct model."""
    from hackable_rl.verifiers.checkers import CheckerOptions, clean_checker
    from hackable_rl.verifiers.types import Example

    rows = [(number, row) for number, row in iter_jsonl(eval_path)][: config.warmstart.eval_size]
    prompts = [format_prompt(tokenizer, _prompt_of(eval_path, number, row), instruct) for number, row in rows]
    settings = GenerationSettings.greedy(config.generation.max_new_tokens, config.generation.stop)
    outputs = generate_completions(
        model, tokenizer, prompts, settings, config.evaluation.batch_size, config.seed
    )
    options = CheckerOptions.from_config(config)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # difficulty -> [correct, scored]
    unscored = 0
    for (_, row), output in zip(rows, outputs, strict=True):
        metadata = dict(row.get("metadata") or {})
        verdict = clean_checker(
            output.text, Example(str(row["id"]), str(row["reference"]), metadata), options
        )
        if verdict.reward is None:
            unscored += 1
            continue
        for key in ("all", f"n_steps={metadata.get('n_steps', 'unknown')}"):
            tally[key][0] += verdict.reward >= 0.5
            tally[key][1] += 1
    return _accuracy_summary(tally, unscored, outputs)


def _accuracy_summary(tally, unscored: int, outputs) -> dict[str, Any]:
    overall_correct, scored = tally["all"] if "all" in tally else (0, 0)
    return {
        "accuracy": overall_correct / scored if scored else None,
        "accuracy_by_difficulty": {
            key: correct / count for key, (correct, count) in sorted(tally.items()) if key != "all"
        },
        "eval_scored": scored,
        "eval_unscored": unscored,
        "mean_completion_tokens": sum(o.n_tokens for o in outputs) / len(outputs) if outputs else None,
        "finished_share": sum(o.finished for o in outputs) / len(outputs) if outputs else None,
    }


# --------------------------------------------------------------------------- the tiny policy


def _loss_summary(losses: list[float], points: int = 10) -> dict[str, Any]:
    """First, last and min loss and `points` window means (the curve without 450 numbers)."""
    if not losses:
        return {"first": None, "last": None, "min": None, "curve": []}
    window = max(1, math.ceil(len(losses) / points))
    curve = [
        {
            "step": min(start + window, len(losses)),
            "loss": sum(losses[start : start + window]) / len(losses[start : start + window]),
        }
        for start in range(0, len(losses), window)
    ]
    return {"first": losses[0], "last": losses[-1], "min": min(losses), "curve": curve}


def _in_band(accuracy: float | None, band: tuple[float, float]) -> bool:
    return accuracy is not None and band[0] <= accuracy <= band[1]


def _warn_if_outside(accuracy: float | None, band: tuple[float, float], steps: int) -> None:
    if _in_band(accuracy, band):
        return
    advice = "raise warmstart.steps" if accuracy is None or accuracy < band[0] else "lower warmstart.steps"
    log.warning(
        "!!! WARM START OUTSIDE THE TARGET BAND: held-out greedy accuracy %s, target [%.2f, %.2f] after %d steps; "
        "%s (or change the task difficulty) so GRPO starts partly capable with headroom",
        "none" if accuracy is None else f"{accuracy:.3f}",
        band[0],
        band[1],
        steps,
        advice,
    )


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def train_tiny_policy(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """Tokenizer, model, SFT, greedy held-out accuracy; saves the policy and writes the metrics."""
    from hackable_rl.tracking import open_tracker

    started = time.perf_counter()
    examples = load_sft_examples(_dataset_file(config, "sft.jsonl"))
    eval_path = _dataset_file(config, "validation.jsonl")  # never test: the band is a development check
    train_path = Storage.of(config.storage).dataset_dir(config.data.name) / "train.jsonl"
    tokenizer = train_tokenizer(
        _tokenizer_corpus(examples, train_path if train_path.exists() else None), config.model.tiny.vocab_size
    )
    torch.manual_seed(config.seed)
    model = build_tiny_model(config.model.tiny, tokenizer, choose_attention(config, "cpu"))
    encoded = encode_examples(tokenizer, examples, config.model.tiny.max_position_embeddings)
    target = policy_dir(config)
    log.info(
        "warm start: %d worked solutions, %d steps, %.2fM parameters -> %s",
        len(examples),
        config.warmstart.steps,
        model.num_parameters() / 1e6,
        target,
    )

    with open_tracker(config, run_name=f"warmstart-{target.name}", kind="warmstart") as tracker:
        tracker.set_tags({"hackable_rl.model_source": TINY})
        tracker.log_params(
            flatten_config(config.model_dump(mode="json", include={"seed", "data", "model", "warmstart"}))
        )

        def on_step(step: int, loss: float, lr: float) -> None:
            if step % _LOG_EVERY == 0 or step == config.warmstart.steps - 1:
                tracker.log_metrics({"warmstart/loss": loss, "warmstart/lr": lr}, step=step)
            if step % _PRINT_EVERY == 0:
                log.info("warm start step %d/%d: loss %.4f, lr %.2e", step, config.warmstart.steps, loss, lr)

        losses = sft_steps(model, encoded, config, tokenizer.pad_token_id, on_step)
        train_seconds = time.perf_counter() - started
        accuracy = greedy_accuracy(model, tokenizer, eval_path, config)
        metrics = _tiny_metrics(config, model, tokenizer, len(examples), losses, accuracy)
        metrics["seconds"] = {"train": train_seconds, "total": time.perf_counter() - started}
        _save_policy(model, tokenizer, target, metrics)
        _write_json(metrics_path, metrics)
        tracker.log_metrics(_flat_numbers(metrics))
        tracker.log_artifact(metrics_path)
    _warn_if_outside(accuracy["accuracy"], config.warmstart.target_accuracy, config.warmstart.steps)
    log.info(
        "warm start: held-out greedy accuracy %s in %.0f s", accuracy["accuracy"], metrics["seconds"]["total"]
    )
    return metrics


def _tiny_metrics(
    config: ExperimentConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sft_examples: int,
    losses: list[float],
    accuracy: dict[str, Any],
) -> dict[str, Any]:
    """What metrics/warmstart.json holds (timings are added by the caller)."""
    return {
        "source": TINY,
        "steps": config.warmstart.steps,
        "seed": config.seed,
        "config_hash": warmstart_config_hash(config),
        "parameters": model.num_parameters(),
        "vocab_size": len(tokenizer),
        "sft_examples": sft_examples,
        "loss": _loss_summary(losses),
        **accuracy,
        "target_accuracy": list(config.warmstart.target_accuracy),
        "in_target": _in_band(accuracy["accuracy"], config.warmstart.target_accuracy),
    }


def _save_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, target: Path, metrics: dict
) -> None:
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)  # safetensors (transformers 5 writes nothing else)
    tokenizer.save_pretrained(target)
    keys = ("steps", "seed", "config_hash", "accuracy", "accuracy_by_difficulty", "in_target")
    _write_json(target / "warmstart.json", {key: metrics[key] for key in keys})


def _flat_numbers(metrics: dict[str, Any], prefix: str = "warmstart/") -> dict[str, float]:
    """The numeric leaves of the metrics as MLflow metric names (curve points left out)."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update(_flat_numbers(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}".replace("=", "_")] = value
    return flat


# --------------------------------------------------------------------------- pretrained reference


def _weight_files(source: PolicySource) -> tuple[Path, list[Path], str | None]:
    """(folder, weight files, resolved hub commit) of a pretrained source."""
    if source.kind == "gguf":
        folder = Path(source.location)
        return folder, [folder / source.gguf_file], None
    folder = download_hub_snapshot(source) if source.kind == "hub" else Path(source.location)
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise UserError(f"{folder}: no .safetensors weights (pickle checkpoints are refused)")
    return folder, weights, folder.name if source.kind == "hub" else None


def _reference_of(config: ExperimentConfig, source: PolicySource) -> dict[str, Any]:
    """What the pretrained weights are: source, kind, location, pins and the sha256 of every weight file."""
    folder, weights, commit = _weight_files(source)
    return {
        "source": config.model.source,
        "kind": source.kind,
        "location": str(folder),
        "revision": source.revision,
        "resolved_commit": commit,
        "gguf_file": source.gguf_file,
        "sha256": {path.name: file_sha256(path) for path in weights},
    }


def record_reference(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """For a pretrained source: writes `<policy_dir>/reference.json` (source, revision, file hashes)."""
    from hackable_rl.tracking import open_tracker

    started = time.perf_counter()
    source = resolve_source(config)
    reference = _reference_of(config, source)
    target = policy_dir(config)
    _write_json(target / "reference.json", reference)
    metrics = {
        "source": config.model.source,
        "trained": False,
        "reference": reference,
        "seconds": {"total": time.perf_counter() - started},
    }
    _write_json(metrics_path, metrics)
    with open_tracker(config, run_name=f"warmstart-{target.name}", kind="warmstart") as tracker:
        tracker.set_tags(
            {"hackable_rl.model_source": config.model.source, "hackable_rl.model_kind": source.kind}
        )
        tracker.log_params(
            {
                "model.source": config.model.source,
                "model.revision": source.revision,
                "model.gguf_file": source.gguf_file,
            }
        )
        tracker.log_dict(reference, "reference.json")
    log.info("pretrained policy %s: reference recorded in %s", config.model.source, target / "reference.json")
    return metrics


# --------------------------------------------------------------------------- a fine-tuned pretrained policy


def _training_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def finetune_pretrained_policy(config: ExperimentConfig, metrics_path: Path = METRICS_PATH) -> dict[str, Any]:
    """`warmstart.pretrained_sft`: SFT of the pretrained source on the worked solutions, greedy
    validation accuracy, then the policy saved as a plain safetensors folder (with its tokenizer and
    the source's reference.json) that GRPO, the capability gate and evaluation load.

    A pretrained instruct model has never seen the strict `<think></think> \\boxed{}` format (SmolLM2-135M
    writes it in none of 64 samples); a few dozen steps of worked solutions teach it, so GRPO groups
    carry signal. The weights stay float32 (on CUDA too): a bf16 copy would lose small updates.
    """
    from hackable_rl.tracking import open_tracker

    started = time.perf_counter()
    examples = load_sft_examples(_dataset_file(config, "sft.jsonl"))
    eval_path = _dataset_file(config, "validation.jsonl")  # never test: the band is a development check
    reference = _reference_of(config, resolve_source(config))
    model, tokenizer = load_source_policy(config)
    model.to(_training_device())
    instruct = is_instruct_policy(config, tokenizer)
    formatted = [SftExample(format_prompt(tokenizer, e.prompt, instruct), e.completion) for e in examples]
    encoded = encode_examples(tokenizer, formatted, model.config.max_position_embeddings)
    target = policy_dir(config)
    log.info(
        "warm start of %s: %d worked solutions, %d steps of %d, lr %.1e -> %s",
        config.model.source, len(examples), config.warmstart.steps, config.warmstart.batch_size,
        config.warmstart.learning_rate, target,
    )
    with open_tracker(config, run_name=f"warmstart-{target.name}", kind="warmstart") as tracker:
        tracker.set_tags({"hackable_rl.model_source": config.model.source, "hackable_rl.pretrained_sft": True})
        tracker.log_params(
            flatten_config(config.model_dump(mode="json", include={"seed", "data", "model", "warmstart"}))
        )
        tracker.log_dict(reference, "reference.json")

        def on_step(step: int, loss: float, lr: float) -> None:
            if step % _LOG_EVERY == 0 or step == config.warmstart.steps - 1:
                tracker.log_metrics({"warmstart/loss": loss, "warmstart/lr": lr}, step=step)
            log.info("warm start step %d/%d: loss %.4f, lr %.2e", step, config.warmstart.steps, loss, lr)

        losses = sft_steps(model, encoded, config, tokenizer.pad_token_id, on_step)
        train_seconds = time.perf_counter() - started
        accuracy = greedy_accuracy(model, tokenizer, eval_path, config, instruct)
        metrics = _tiny_metrics(config, model, tokenizer, len(examples), losses, accuracy)
        metrics.update(source=config.model.source, trained=True, reference=reference)
        metrics["seconds"] = {"train": train_seconds, "total": time.perf_counter() - started}
        _save_policy(model, tokenizer, target, metrics)
        _write_json(target / "reference.json", reference)
        _write_json(metrics_path, metrics)
        tracker.log_metrics(_flat_numbers({k: v for k, v in metrics.items() if k != "reference"}))
        tracker.log_artifact(metrics_path)
    _warn_if_outside(accuracy["accuracy"], config.warmstart.target_accuracy, config.warmstart.steps)
    log.info(
        "warm start of %s: validation greedy accuracy %s in %.0f s",
        config.model.source, accuracy["accuracy"], metrics["seconds"]["total"],
    )
    return metrics
