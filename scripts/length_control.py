"""The natural study's length control against the natural study itself: k3 under Dr. GRPO's
length-unbiased loss (pipelines/natural_dr_grpo) minus k3 under GRPO (pipelines/natural_hacking),
each replicate from the same warm start, paired by prompt and replicate (95% t-interval over the
replicates, as every study comparison). Also the clean references' difference, and each study's own
rise over base. Writes pipelines/natural_dr_grpo/metrics/vs_grpo.json and prints a table.

    python scripts/length_control.py

A secondary comparison, outside both studies' declared families (it was declared in the control's
study.yaml comments as how to read it, not as a primary outcome): every row is marked secondary and
its p-values are not adjusted. Each row carries its equivalence reading (TOST against the control's
declared `equivalence_margin`), and its intervals are labelled as the studies' own are: across
replicates, each with its own warm start.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hackable_rl.config.study import load_study
from hackable_rl.report.conditions import interval_label
from hackable_rl.report.declared import labelled, load_cell_conditions, paired_outcome, write_outcomes

ROOT = Path(__file__).resolve().parents[1] / "pipelines"
CONTROL, NATURAL = ROOT / "natural_dr_grpo", ROOT / "natural_hacking"
ROWS = (
    ("k3_share_dr_minus_grpo", "k3", "baseline", "exploit_share"),
    ("k3_pass_at_1_dr_minus_grpo", "k3", "baseline", "pass_at_1"),
    ("clean_share_dr_minus_grpo", "clean", "baseline", "exploit_share"),
    ("clean_pass_at_1_dr_minus_grpo", "clean", "baseline", "pass_at_1"),
)


def main() -> None:
    control, natural = load_cell_conditions(CONTROL / "results"), load_cell_conditions(NATURAL / "results")
    margin = load_study(CONTROL / "study.yaml").equivalence_margin
    outcomes = []
    for name, cell, method, metric in ROWS:
        outcome, _ = paired_outcome(name, cell, f"{method} (Dr. GRPO)", f"{method} (GRPO)", control.get((cell, method), {}),
                                    natural.get((cell, method), {}), metric, "difference detected: CI excludes 0",
                                    lambda a, b, p: p.above_zero or p.below_zero, margin)
        outcomes.append(replace(outcome, secondary=True))
    outcomes = labelled(outcomes, interval_label(CONTROL / "results"))
    path = write_outcomes(CONTROL / "metrics" / "vs_grpo.json", outcomes)
    for o in outcomes:
        print(f"{o.name:32s} {o.cell:6s} {o.metric:14s} Dr. GRPO {o.mean_a:.3f}  GRPO {o.mean_b:.3f}  {o.ci_text}  "
              f"p {o.p_value:.3g}  {o.equivalence}  per replicate {', '.join(f'{v:+.3f}' for v in o.per_replicate)}")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
