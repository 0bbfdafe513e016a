"""The runs table as `hackable-rl ui` opens it: a view MLflow's UI loads from an experiment tag.

MLflow 3's "Share" button stores the runs page's state (filter, columns, order) as the experiment
tag `mlflow.sharedViewState.<key>` and opens it from the URL `?viewStateShareKey=<key>`. The project
writes that tag itself, so the runs table shows the headline numbers (pass@1, the hacking gap) and
the labels (method, condition, rate, seed) of every run with no configuration by hand.
"""

from __future__ import annotations

import json
from typing import Any

# MLflow 3.17's charts page draws a section per key prefix (what comes before the last `/`), sorted
# by code point, then unprefixed metrics ("Model metrics"), then `system/`. An upper-case initial sorts
# before every lower-case prefix (alarm, format, judge, ...): the headline curves come first.
HEADLINE_SECTION = "Headline/"
EVAL_PASS_AT_1 = f"{HEADLINE_SECTION}eval_pass_at_1"  # pass@1 at each evaluated checkpoint
EVAL_HACKING_GAP = f"{HEADLINE_SECTION}eval_hacking_gap"
_CHART_NAMES = {"hacking_gap": f"{HEADLINE_SECTION}hacking_gap"}  # metrics.jsonl name -> MLflow name


def chart_name(key: str) -> str:
    """The name MLflow charts a metrics.jsonl series by: its own, or the headline section's."""
    return _CHART_NAMES.get(key, key)


def chart_names(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics.jsonl row under the names MLflow charts it by."""
    return {chart_name(key): value for key, value in row.items()}


RUNS_VIEW_KEY = "hackable-rl-runs"
_VIEW_TAG = f"mlflow.sharedViewState.{RUNS_VIEW_KEY}"

HEADLINE_COLUMNS = (
    ("metrics", EVAL_PASS_AT_1), ("metrics", EVAL_HACKING_GAP), ("tags", "method"), ("tags", "condition"),
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
    """Writes (or rewrites) the experiment's runs view, so a changed column list reaches old stores.

    Two runs that start at once against a new experiment both write it, and the store can refuse the
    second insert of the same tag (PostgreSQL's unique key): a view another run wrote is the same
    view, and otherwise the write is tried once more, now as an update."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    view = json.dumps(runs_view_state())
    try:
        client.set_experiment_tag(experiment_id, _VIEW_TAG, view)
    except MlflowException:
        if client.get_experiment(experiment_id).tags.get(_VIEW_TAG) != view:
            client.set_experiment_tag(experiment_id, _VIEW_TAG, view)


def runs_view_query() -> str:
    """The runs page's URL query that opens the view in the model-training layout."""
    return f"viewStateShareKey={RUNS_VIEW_KEY}&workflowType=machine_learning"
