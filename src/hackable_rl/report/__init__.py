"""Reports: plots (PNG, matplotlib Agg) and a report.md whose every claim is computed from a table.

- `study`: a study's condition.json files -> summary.csv/json, plots, report.md (spec section 7).
- `single`: the root pipeline's metrics (warm start, base eval, trained eval, training curve).
"""

from hackable_rl.report.single import build_single_report
from hackable_rl.report.study import build_study_report

__all__ = ["build_single_report", "build_study_report"]
