"""metrics/headline.json: the few numbers `dvc exp show` lists for each experiment of the root pipeline.

DVC makes a column of every key of every declared metric and squeezes the table into the terminal,
so this file is the root pipeline's only declared metric: one flat object of short keys, rounded to
the three decimals the report prints (the full numbers stay in eval.json and compare.json).

    condition          <method>-<channel>-r<rate>: the corrupted runs' run name without the seed
    seeds              the replicates (pipeline seeds) the numbers average over ("0,1,2")
    pass@1             the corrupted runs' test pass@1, mean over replicates and prompts
    ci_low, ci_high    its 95% t-interval across replicates (evaluation.paired.policy_mean_ci); null
                       with one replicate
    gap                their hacking gap on the test split (normalised reward - judged correct)
    clean              the clean-trained reference's test pass@1 (the same GRPO at corruption.rate 0)

A value that could not be computed (a policy not evaluated yet) is null.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hackable_rl.core.jsonl import write_json
from hackable_rl.report.single import SingleInputs, policy_intervals

if TYPE_CHECKING:
    from hackable_rl.config.experiment import ExperimentConfig

HEADLINE_KEYS = ("condition", "seeds", "pass@1", "ci_low", "ci_high", "gap", "clean")
_DIGITS = 3


def headline_metrics(inputs: SingleInputs, method: str, channel: str, rate: float) -> dict[str, Any]:
    """The headline of the root pipeline's metrics folder, keyed as HEADLINE_KEYS."""
    sampled = policy_intervals(inputs, "pass_at_1")
    trained, clean = sampled["trained"], sampled["clean"]
    gap = policy_intervals(inputs, "hacking_gap")["trained"]
    seeds = [folder.name.removeprefix("s") for folder in inputs.seed_dirs("trained")]
    return {
        "condition": f"{method}-{channel}-r{rate:g}",
        "seeds": ",".join(seeds),
        "pass@1": _rounded(trained.diff if trained else None),
        "ci_low": _rounded(trained.ci_low if trained else None),
        "ci_high": _rounded(trained.ci_high if trained else None),
        "gap": _rounded(gap.diff if gap else None),
        "clean": _rounded(clean.diff if clean else None),
    }


def write_headline(path: Path, inputs: SingleInputs, config: ExperimentConfig) -> Path:
    """Writes the headline of the corrupted runs that `config` (method, corruption) describes."""
    corruption = config.corruption
    return write_json(path, headline_metrics(inputs, config.method, corruption.channel, corruption.rate))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, _DIGITS)
