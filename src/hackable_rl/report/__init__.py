"""Reports: plots (PNG, matplotlib Agg) and a report.md whose every claim is computed from a table.

- `study`: a study's condition.json files -> summary.csv/json, plots, report.md (spec section 7).
- `single`: the root pipeline's metrics (warm start, base eval, trained eval, training curve).
- `headline`: metrics/headline.json, the root's one DVC metric (`dvc exp show`).
- `build`: the `report` stage (`build_report`), which picks one of the above.

The package itself imports nothing, so that importing one report loads only what it needs. What the
reports read lives below them: condition files in `study.records`, onsets in `alarm.onset`.
"""
