"""The capability gate: can the starting policy solve enough validation problems for GRPO to learn?

GRPO learns from the differences inside a group of completions of one prompt. When every completion
of every group is wrong, every advantage is zero and training only burns compute: the predecessor
study trained SmolLM2-135M on GSM8K in 27 conditions and every pass@1 stayed at 0. So before GRPO on
a pretrained model.source, the gate samples `capability.k` completions for each of `capability.prompts`
validation prompts with the rollout settings (`generation`), judges them with the strict clean judge
(the check the correctness reward makes), and refuses to train when pass@k is below
`capability.min_pass_at_k`, unless `capability.force`. The result goes to `<run>/capability.json`,
run.json (`capability`) and the MLflow run (capability.json, and its tags `capability.*`).

The tiny model is not gated: its warm start aims at a validation accuracy band instead.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_json
from hackable_rl.core.storage import Storage
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.evaluation.metrics import mean_pass_at_k

__all__ = ["CapabilityResult", "gate_split", "measure_capability", "check_capability", "log_capability"]

log = logging.getLogger(__name__)

# The one place that names the split the gate measures on: the first of these the prepare stage
# wrote. `validation` is the development split; `eval` is what datasets prepared before the
# validation split existed call their held-out problems. Never `test`: nothing is tuned on it.
GATE_SPLITS = ("validation", "eval")
RESULT_FILE = "capability.json"


@dataclass(frozen=True)
class CapabilityResult:
    """One measurement of the gate."""

    split: str
    """Prepared split the prompts came from."""
    prompts: int
    """Prompts judged (those whose reference parsed)."""
    k: int
    """Samples per prompt (n = k)."""
    pass_at_1: float | None
    pass_at_k: float | None
    mixed_groups: float | None
    """Share of prompts whose k samples are neither all right nor all wrong: groups that carry signal."""
    min_pass_at_k: float
    passed: bool
    forced: bool
    seconds: float

    def to_record(self) -> dict[str, Any]:
        return asdict(self)


def gate_split(config: ExperimentConfig) -> tuple[str, Path]:
    """(split name, JSONL path) of the prepared split the gate measures on."""
    folder = Storage.of(config.storage).dataset_dir(config.data.name)
    for split in GATE_SPLITS:
        path = folder / f"{split}.jsonl"
        if path.exists():
            return split, path
    raise UserError(
        f"{folder}: no {' or '.join(f'{s}.jsonl' for s in GATE_SPLITS)} for the capability gate; run "
        "`hackable-rl prepare` with data.validation_size > 0 (or set capability.enabled: false)"
    )


def _measuring_device(model: Any) -> Any:
    """CUDA when there is one: the trainer moves the policy there anyway, and sampling on the CPU of a
    GPU machine would make the gate the slowest part of a short run."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch

    return torch.device("cuda") if torch.cuda.is_available() else model.device


def measure_capability(config: ExperimentConfig, model: Any, tokenizer: Any) -> CapabilityResult:
    """Samples k completions per validation prompt and judges them strictly; no decision taken."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.generation import GenerationSettings, generate_completions
    from hackable_rl.models.loading import format_prompt, is_instruct_policy

    started = time.perf_counter()
    gate, judge = config.capability, JudgeOptions.of(config.rewards, "strict")
    split, path = gate_split(config)
    rows = read_jsonl(path)[: gate.prompts]
    instruct = is_instruct_policy(config, tokenizer)
    prompts = [format_prompt(tokenizer, row["prompt"], instruct) for row in rows for _ in range(gate.k)]
    model.to(_measuring_device(model))
    outputs = generate_completions(
        model, tokenizer, prompts, GenerationSettings.for_training(config), config.evaluation.batch_size, config.seed,
        label="capability gate",
    )
    counts = []  # (n, correct) per prompt
    for index, row in enumerate(rows):
        verdicts = [
            judge.judge(output.text, str(row["reference"])).correct
            for output in outputs[index * gate.k : (index + 1) * gate.k]
        ]
        judged = [verdict for verdict in verdicts if verdict is not None]  # None: unparseable reference
        if len(judged) == gate.k:
            counts.append((gate.k, sum(judged)))
    pass_at_k = mean_pass_at_k(counts, gate.k)
    return CapabilityResult(
        split=split,
        prompts=len(counts),
        k=gate.k,
        pass_at_1=mean_pass_at_k(counts, 1),
        pass_at_k=pass_at_k,
        mixed_groups=sum(0 < c < n for n, c in counts) / len(counts) if counts else None,
        min_pass_at_k=gate.min_pass_at_k,
        passed=pass_at_k is not None and pass_at_k >= gate.min_pass_at_k,
        forced=gate.force,
        seconds=time.perf_counter() - started,
    )


def _refusal(config: ExperimentConfig, result: CapabilityResult) -> str:
    measured = "none judged" if result.pass_at_k is None else f"{result.pass_at_k:.3f}"
    return (
        f"capability gate: {config.model.source} has pass@{result.k} {measured} on {result.prompts} "
        f"{result.split} prompts of {config.data.name}, below capability.min_pass_at_k "
        f"{result.min_pass_at_k:g}, so GRPO groups would carry no signal; use a task it can partly solve "
        "(data.provider: arith), warm-start it on worked solutions (warmstart.pretrained_sft: true), "
        "or train anyway with --set capability.force=true"
    )


def check_capability(
    config: ExperimentConfig, model: Any, tokenizer: Any, run_dir: Path
) -> dict[str, Any] | None:
    """The gate before GRPO: None when it does not apply (tiny model, capability.enabled off); the
    result record otherwise, also written to `<run_dir>/capability.json`. A resumed run reuses the
    record its first attempt wrote. Raises a one-line UserError when the policy is too weak, unless forced."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.loading import TINY

    if config.model.source == TINY or not config.capability.enabled:
        return None
    saved = run_dir / RESULT_FILE
    if saved.exists():
        return json.loads(saved.read_text(encoding="utf-8"))
    result = measure_capability(config, model, tokenizer)
    write_json(saved, result.to_record())
    log.info(
        "capability gate: pass@1 %s, pass@%d %s, mixed groups %s on %d %s prompts (%.0f s): %s",
        result.pass_at_1, result.k, result.pass_at_k, result.mixed_groups, result.prompts, result.split,
        result.seconds, "passed" if result.passed else "FORCED past it" if result.forced else "refused",
    )
    if not result.passed and not result.forced:
        raise UserError(_refusal(config, result))
    return result.to_record()


def log_capability(tracker: Any, record: dict[str, Any] | None) -> None:
    """The gate's result in the MLflow run: capability.json, and its numbers as tags (columns in the
    runs table) rather than single-point charts."""
    if record is None:
        return
    numbers = {key: record[key] for key in ("pass_at_1", "pass_at_k", "mixed_groups", "prompts", "k")}
    tracker.set_tags({f"capability.{key}": value for key, value in numbers.items()})
    tracker.log_dict(record, RESULT_FILE)
