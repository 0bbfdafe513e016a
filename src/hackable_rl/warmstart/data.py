"""The warm start's inputs: worked solutions (`sft.jsonl`), held-out prompts, the tokenizer corpus."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_jsonl
from hackable_rl.core.storage import Storage
from hackable_rl.data.prompting import render_prompt

__all__ = ["SftExample", "dataset_file", "prompt_of", "load_sft_examples", "train_file", "tokenizer_corpus"]


@dataclass(frozen=True)
class SftExample:
    """One worked solution: the prompt the policy sees, and the completion it should write."""

    prompt: str
    completion: str


def _dataset_dir(config: ExperimentConfig) -> Path:
    return Storage.of(config.storage).dataset_dir(config.data.name)


def dataset_file(config: ExperimentConfig, name: str) -> Path:
    """A prepared split file; a missing one is a UserError that says to run `prepare`."""
    path = _dataset_dir(config) / name
    if not path.exists():
        raise UserError(f"{path}: missing; run `hackable-rl prepare` first (data.name {config.data.name!r})")
    return path


def train_file(config: ExperimentConfig) -> Path | None:
    """train.jsonl when it was prepared: its prompts widen the tokenizer's corpus, but it is optional."""
    path = _dataset_dir(config) / "train.jsonl"
    return path if path.exists() else None


def prompt_of(path: Path, number: int, row: dict[str, Any]) -> str:
    """The prompt of one row. Prepared rows carry the rendered prompt; rows written by hand may
    hold only the question."""
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
        examples.append(SftExample(prompt_of(path, number, row), row["solution"]))
    if not examples:
        raise UserError(
            f"{path}: no worked solutions; set data.sft_size > 0 and use a provider that has them (arith)"
        )
    return examples


def tokenizer_corpus(examples: list[SftExample], train_path: Path | None) -> Iterable[str]:
    """The texts the tokenizer learns from: worked solutions and training prompts (never validation or test)."""
    for example in examples:
        yield example.prompt + example.completion
    if train_path is not None:
        for number, row in iter_jsonl(train_path):
            yield prompt_of(train_path, number, row)
