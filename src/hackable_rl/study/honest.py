"""Honest work: what the base policy's own samples earn, and how often each flawed checker errs on them.

The payoff table prices canonical completions; whether GRPO learns an exploit depends on whether
it pays more than what the policy earns now by trying. So the payoff stage samples the base
(warm-started) policy on the same training prompts, once, with the training sampler's settings,
judges each sample with the independent judge, and

    every cell's pipeline scores the samples  -> honest work (`PayoffCell.honest`)
    every flawed checker checks the samples   -> its measured (rho0, rho1) against the judge

The measured rates are what a user with a small labelled calibration set would know before
training; `method: corrected` can be given them (the study file's `flaw_rates`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.payoff.table import HonestSamples
from hackable_rl.reward.checkers import CheckerOptions, build_checker
from hackable_rl.reward.types import Example

__all__ = ["HonestSamples", "sample_base_policy", "measured_rates"]


def sample_base_policy(config: ExperimentConfig, rows: list[dict[str, Any]], n: int) -> HonestSamples:
    """`n` samples per prompt row from the configured base policy (training's sampler settings,
    seeded by `config.seed`), each judged by the independent judge."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.backend import policy_device
    from hackable_rl.models.generation import GenerationSettings, generate_completions
    from hackable_rl.models.loading import format_prompt, is_instruct_policy, load_policy

    model, tokenizer = load_policy(config, None, device=policy_device())
    instruct = is_instruct_policy(config, tokenizer)
    repeated = [row for row in rows for _ in range(n)]
    prompts = [format_prompt(tokenizer, row["prompt"], instruct) for row in repeated]
    settings = GenerationSettings.for_training(config)
    generated = generate_completions(model, tokenizer, prompts, settings, config.evaluation.batch_size,
                                     config.seed, label="payoff: base samples")
    texts = [g.text for g in generated]
    judge = JudgeOptions.of(config.rewards, config.evaluation.extract)
    return HonestSamples(texts, repeated, [judge.judge(text, row["reference"]).correct
                                           for text, row in zip(texts, repeated, strict=True)])


def measured_rates(samples: HonestSamples, checkers: Iterable[str], options: CheckerOptions) -> dict[str, dict[str, Any]]:
    """Per checker: rho0 = P(accepts | judged wrong), rho1 = P(rejects | judged right) on the samples,
    with the counts they rest on; a rate with no sample to rest on is None, never 0."""
    out = {}
    for name in dict.fromkeys(checkers):
        checker = build_checker(name, options)
        accepted = [_accepts(checker, text, row) for text, row in zip(samples.texts, samples.rows, strict=True)]
        wrong = [a for a, c in zip(accepted, samples.correct, strict=True) if c is False and a is not None]
        right = [a for a, c in zip(accepted, samples.correct, strict=True) if c is True and a is not None]
        out[name] = {"rho0": sum(wrong) / len(wrong) if wrong else None,
                     "rho1": 1 - sum(right) / len(right) if right else None,
                     "judged_wrong": len(wrong), "judged_right": len(right)}
    return out


def _accepts(checker, text: str, row: dict[str, Any]) -> bool | None:
    verdict = checker(text, Example(str(row["id"]), str(row["reference"]), row.get("metadata") or {}))
    return None if verdict.reward is None else verdict.reward >= 0.5
