"""The runs table as `hackable-rl ui` opens it: a view MLflow's UI loads from an experiment tag.

MLflow 3's "Share" button stores the runs page's state (filter, columns, order) as the experiment
tag `mlflow.sharedViewState.<key>` and opens it from the URL `?viewStateShareKey=<key>`. The project
writes that tag itself, so the runs table shows the headline numbers (pass@1, the hacking gap) and
the labels (method, condition, rate, seed) of every run with no configuration by hand.
"""

from __future__ import annotations

import json
from typing import Any

RUNS_VIEW_KEY = "hackable-rl-runs"
_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"

HEADLINE_COLUMNS = (
    ("metrics", "eval_pass_at_1"), ("metrics", "eval_hacking_gap"), ("tags", "method"), ("tags", "condition"),
    ("tags", "corruption.rate"), ("tags", "seed"), ("tags", "hackable_rl.kind"), ("attributes", "Duration"),
)
"""The runs table's columns, in order: MLflow names a column `<type>.` and the key in backquotes."""


def runs_view_state() -> dict[str, Any]:
    """Training runs and evaluations of policies without a run (the base), newest first, with the
    headline columns; the warm-start run, which has none of them, is filtered out."""
    columns = [f"{kind}.`{key}`" for kind, key in HEADLINE_COLUMNS]
    return {
        "searchFilter": "tags.`hackable_rl.kind` != 'warmstart'",
        "orderByKey": "attributes.start_time", "orderByAsc": False,
        "selectedColumns": columns, "columnOrder": columns,
    }


def set_runs_view(client: Any, experiment_id: str) -> None:
    """Writes (or rewrites) the experiment's runs view, so a changed column list reaches old stores."""
    client.set_experiment_tag(experiment_id, _VIEW_TAG, json.dumps(runs_view_state()))


def runs_view_query() -> str:
    """The runs page's URL query that opens the view in the model-training layout."""
    return f"viewStateShareKey={RUNS_VIEW_KEY}&workflowType=machine_learning"
