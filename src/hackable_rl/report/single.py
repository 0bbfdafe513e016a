"""The root pipeline's report: the base policy, the clean reference and the corrupted run, over
several replicates (whole pipeline seeds: each its own warm start), from the DVC metrics folder.

    metrics/warmstart/s<seed>/warmstart.json   each replicate's validation greedy accuracy after its warm
                                               start (or one metrics/warmstart.json)
    metrics/base/s<seed>/...                   each replicate's base (warm-started) policy on the test
                                               split: eval.json, prompts.jsonl (or one metrics/base/)
    metrics/clean/s<seed>/...                  the clean reference (GRPO at corruption.rate 0), per
                                               replicate: eval.json, prompts.jsonl, train.json, train_curve.csv
    metrics/trained/s<seed>/...                the run against the configured (corrupted) verifier, per replicate
    metrics/compare.json                       paired comparisons with 95% t-intervals across replicates
        -> <out>/report.md, headline.png, train_curves.png

A missing file is reported as missing in report.md (a partial pipeline still gets a report).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json as read_json_document
from hackable_rl.core.stats import mean
from hackable_rl.evaluation.paired import Comparison, comparison_records, policy_mean_ci
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, read_prompt_results
from hackable_rl.evaluation.report_metrics import PREFIX as REPORT_PREFIX
from hackable_rl.extensions import restates_accuracy
from hackable_rl.report import plots
from hackable_rl.report.rate_grid import fmt
from hackable_rl.training.curves import SUMMARISED_KEYS

log = logging.getLogger(__name__)

POLICIES = ("base", "clean", "trained")
LABELS = {"base": "base (no RL)", "clean": "clean-trained (rate 0)", "trained": "trained"}


@dataclass(frozen=True)
class SingleInputs:
    """Where the root pipeline's metrics live (all under one metrics folder by default)."""

    metrics_dir: Path

    @classmethod
    def under(cls, metrics_dir: Path) -> SingleInputs:
        return cls(metrics_dir)

    @property
    def warmstarts(self) -> list[Path]:
        """Each replicate's warmstart.json (metrics/warmstart/s*/), or the one metrics/warmstart.json."""
        per_replicate = sorted(self.metrics_dir.glob("warmstart/s*/warmstart.json"), key=lambda path: path.parent.name)
        return per_replicate or [self.metrics_dir / "warmstart.json"]

    @property
    def compare(self) -> Path:
        return self.metrics_dir / "compare.json"

    def seed_dirs(self, policy: str) -> list[Path]:
        """The policy's evaluation folders, one per replicate (`s<seed>`); a base evaluated once is
        its one folder."""
        replicates = sorted(self.metrics_dir.joinpath(policy).glob("s*"), key=lambda path: path.name)
        if policy == "base" and not replicates:
            return [self.metrics_dir / "base"]
        return replicates


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's mapping, or None when it does not exist (the report says so)."""
    if not path.exists():
        return None
    data = read_json_document(path)  # not UTF-8, not JSON, NaN: a UserError naming the file and line
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object of metrics")
    return data


def read_curve(path: Path) -> pd.DataFrame | None:
    if not path.exists():
        return None
    curve = pd.read_csv(path)
    if "step" not in curve.columns:
        raise UserError(f"{path}: expected a `step` column (written by `hackable-rl train --metrics-dir`)")
    return curve


def policy_intervals(inputs: SingleInputs, metric: str) -> dict[str, Comparison | None]:
    """Each policy's `metric` with its 95% t-interval across replicates; None where not evaluated."""
    intervals: dict[str, Comparison | None] = {}
    for policy in POLICIES:
        folders = [folder for folder in inputs.seed_dirs(policy) if (folder / PROMPTS_FILE).exists()]
        seeds = [read_prompt_results(folder / PROMPTS_FILE) for folder in folders]
        defined = seeds and all(any(r.value(metric) is not None for r in results) for results in seeds)
        intervals[policy] = policy_mean_ci(seeds, metric) if defined else None
    return intervals


def build_single_report(inputs: SingleInputs, out_dir: Path, title: str, condition: str) -> Path:
    """Writes report.md and its PNGs into `out_dir`; returns the report path. `condition` names the
    corrupted run's channel and rate (e.g. `flip at rate 0.2`) in titles and labels."""
    sampled, greedy = policy_intervals(inputs, "pass_at_1"), policy_intervals(inputs, "greedy_accuracy")
    labels = LABELS | {"trained": f"trained ({condition})"}
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [plots.policy_panels(sampled, greedy, labels, f"test split; corrupted run: {condition}",
                                   out_dir / "headline.png")]
    curves = {labels[policy]: [read_curve(d / "train_curve.csv") for d in inputs.seed_dirs(policy)]
              for policy in ("clean", "trained")}
    figures.append(plots.training_curves(curves, f"GRPO on the training prompts; corrupted runs: {condition}",
                                         out_dir / "train_curves.png", corrupted=labels["trained"]))
    report = out_dir / "report.md"
    restated = restates_accuracy(condition.split(" at rate ")[0])
    report.write_text(single_markdown(title, inputs, labels, sampled, greedy, figures, restated), encoding="utf-8")
    log.info("report: %s", report)
    return report


_EVAL_ROWS = ("pass_at_1", "transfer_pass_at_1", "judges_disagree_share", "greedy_accuracy", "observed_reward",
              "hacking_gap", "false_positive_rate",
              "false_negative_rate", "coverage", "answer_consistency", "thinking_tokens_mean")


def _seed_means(inputs: SingleInputs, policy: str) -> dict[str, float]:
    """Each numeric eval.json metric averaged over the policy's seeds (keys missing in any seed dropped)."""
    documents = [read_json(folder / "eval.json") for folder in inputs.seed_dirs(policy)]
    documents = [d for d in documents if d is not None]
    if not documents:
        return {}
    keys = set.intersection(*(set(d) for d in documents))
    means = {}
    for key in keys:
        values = [d[key] for d in documents]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            means[key] = mean(values)
    return means


def single_markdown(
    title: str, inputs: SingleInputs, labels: dict[str, str], sampled: dict[str, Comparison | None],
    greedy: dict[str, Comparison | None], figures: list[Path], restated: bool = False,
) -> str:
    """report.md; `restated`: under the trained run's channel the hacking gap restates accuracy."""
    warm = [(read_json(path) or {}).get("accuracy") for path in inputs.warmstarts]
    lines = [f"# {title}", "", "## Headline (test split, 95% t-intervals across replicates)", ""]
    lines += [f"- warm start, validation greedy accuracy: {', '.join(fmt(value) for value in warm)}"
              f" ({len(warm)} warm start{'s' if len(warm) != 1 else ''})"]
    for policy in POLICIES:
        replicates = len(inputs.seed_dirs(policy))
        lines.append(f"- {labels[policy]}: sampled pass@1 {_interval(sampled[policy])}, "
                     f"greedy {_interval(greedy[policy])} ({replicates} replicate{'s' if replicates != 1 else ''})")
    lines += _transfer_lines(inputs, labels)
    lines += ["", "## Paired comparisons (`metrics/compare.json`)", "", *comparison_lines(inputs.compare), ""]
    if restated:
        lines += ["Under random flips the hacking gap restates accuracy (its expectation is p(1 - 2 acc) for "
                  "flip rate p): the `_gap` rows restate the accuracy differences, they are not evidence of "
                  "hacking.", ""]
    lines += ["## Independent evaluation (seed means)", ""]
    means = {policy: _seed_means(inputs, policy) for policy in POLICIES}
    lines += ["| metric | " + " | ".join(labels[p] for p in POLICIES) + " |", "|---|" + "---|" * len(POLICIES)]
    pass_k = sorted({k for m in means.values() for k in m if k.startswith("pass_at_") and k[8:].isdigit()}
                    - {"pass_at_1"}, key=lambda key: int(key[8:]))
    extra = sorted({k for m in means.values() for k in m if k.startswith(REPORT_PREFIX)})  # evaluation.metrics
    for key in (*_EVAL_ROWS, *pass_k, *extra):
        lines.append(f"| {key} | " + " | ".join(fmt(means[p].get(key)) for p in POLICIES) + " |")
    lines += ["", "The clean-trained runs are the same GRPO with an uncorrupted verifier (corruption.rate 0): "
              "what training can teach at all, the bar the corrupted run is read against.", ""]
    for policy in ("clean", "trained"):
        for folder in inputs.seed_dirs(policy):
            lines += [f"## Training: {labels[policy]}, {folder.name} (sampled on training prompts)", "",
                      *_train_lines(read_json(folder / "train.json")), ""]
    lines += ["## Plots", "", *(f"![{p.stem}]({p.name})" for p in figures), "",
              "Sampled pass@1 draws n completions per prompt at the evaluation temperature; greedy decodes "
              "once. Whiskers are 95% t-intervals across replicates (each a whole pipeline seed, its own warm "
              "start included); differences between policies are read from the paired comparisons above, not "
              "from overlapping whiskers. Holm's correction runs over the pass@1 comparisons of the declared "
              "pairs; each line gives the raw and the adjusted p-value.", ""]
    return "\n".join(lines)


def _transfer_lines(inputs: SingleInputs, labels: dict[str, str]) -> list[str]:
    """The headline under the transferred judge (a second verifier family), when there was one."""
    transfer = policy_intervals(inputs, "pass_at_1_transfer")
    if not any(transfer.values()):
        return []
    lines = ["", "Under the transferred judge (`evaluation.transfer_extract`: another verifier family than the "
             "training checkers; `judges_disagree_share` below counts the samples where the two judges differ):", ""]
    return lines + [f"- {labels[policy]}: sampled pass@1 {_interval(transfer[policy])}" for policy in POLICIES]


def _interval(value: Comparison | None) -> str:
    if value is None:
        return "n/a"
    if value.ci_low is None:
        return f"{value.diff:.3f} ({value.reason})"
    return f"{value.diff:.3f} [{value.ci_low:.3f}, {value.ci_high:.3f}]"


def comparison_lines(path: Path) -> list[str]:
    """One line per comparison: `clean_vs_base: pass_at_1 +0.162 [0.131, 0.193]` (or "no difference
    detected" when the CI covers 0; with a margin, the equivalence verdict)."""
    document = read_json(path)
    if document is None:
        return [f"No {path}: run `hackable-rl compare`."]
    lines = []
    for name, entry in comparison_records(document).items():
        lines.append(f"- {name}: {Comparison.from_record(entry).summary()}")
    return lines


def _train_lines(train: dict[str, Any] | None) -> list[str]:
    if train is None:
        return ["No train.json."]
    lines = [f"- steps: {train.get('step')}, seconds: {fmt(train.get('seconds'), 0)}"]
    for key in SUMMARISED_KEYS:
        lines.append(f"- {key}: first tenth {fmt(train.get(f'{key}/first'))} -> last tenth {fmt(train.get(f'{key}/last'))}")
    return lines
