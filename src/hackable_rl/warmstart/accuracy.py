"""Greedy held-out accuracy of the warm-started policy, overall and by arithmetic difficulty.

The completions come from the shared sampler (`models.generation`) and are judged by the
independent judge in strict mode (`evaluation.judge`), which is the clean training checker: the
warm start is measured by the rules GRPO will be rewarded under.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.jsonl import iter_jsonl
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.models.generation import GeneratedText, GenerationSettings, generate_completions
from hackable_rl.models.loading import format_prompt
from hackable_rl.warmstart.data import prompt_of

__all__ = ["greedy_accuracy"]

Tally = dict[str, list[int]]
"""Difficulty key ("all", "n_steps=2", ...) -> [correct, judged]."""


def greedy_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    eval_path: Path,
    config: ExperimentConfig,
    instruct: bool = False,
) -> dict[str, Any]:
    """Greedy accuracy under the strict judge on the first `warmstart.eval_size` held-out rows,
    overall and by `metadata.n_steps` (the arithmetic difficulty). `instruct`: wrap each prompt in the
    tokenizer's chat template, as training does for an instruct model."""
    rows = list(iter_jsonl(eval_path))[: config.warmstart.eval_size]
    prompts = [format_prompt(tokenizer, prompt_of(eval_path, number, row), instruct) for number, row in rows]
    settings = GenerationSettings.greedy(config.generation.max_new_tokens, config.generation.stop)
    outputs = generate_completions(
        model, tokenizer, prompts, settings, config.evaluation.batch_size, config.seed, label="warm start accuracy"
    )
    judge = JudgeOptions.of(config.rewards, "strict")
    correct = [judge.judge(output.text, str(row["reference"])).correct  # None: the reference does not parse
               for (_, row), output in zip(rows, outputs, strict=True)]
    return _accuracy_summary(_tally(rows, correct), correct.count(None), outputs)


def _tally(rows: Sequence[tuple[int, dict[str, Any]]], correct: Sequence[bool | None]) -> Tally:
    tally: Tally = defaultdict(lambda: [0, 0])
    for (_, row), verdict in zip(rows, correct, strict=True):
        if verdict is None:
            continue
        difficulty = (row.get("metadata") or {}).get("n_steps", "unknown")
        for key in ("all", f"n_steps={difficulty}"):
            tally[key][0] += verdict
            tally[key][1] += 1
    return tally


def _accuracy_summary(tally: Tally, unjudged: int, outputs: Sequence[GeneratedText]) -> dict[str, Any]:
    """The accuracy part of metrics/warmstart.json (its keys, in this order)."""
    overall_correct, judged = tally["all"] if "all" in tally else (0, 0)
    return {
        "accuracy": overall_correct / judged if judged else None,
        "accuracy_by_difficulty": {
            key: correct / count for key, (correct, count) in sorted(tally.items()) if key != "all"
        },
        "eval_scored": judged,
        "eval_unscored": unjudged,
        "mean_completion_tokens": sum(o.n_tokens for o in outputs) / len(outputs) if outputs else None,
        "finished_share": sum(o.finished for o in outputs) / len(outputs) if outputs else None,
    }
