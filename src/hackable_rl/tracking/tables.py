"""MLflow tables: generation records in blocks of steps, evaluation samples under one name.

A table is a JSON artifact in MLflow's own table format (pandas `orient="split"`) that the run lists
in its `mlflow.loggedArtifacts` tag; the UI opens listed files as tables and lines tables of the
same name up across runs (the runs page's "Artifact evaluation" view). The tag is one string that MLflow cuts
at 8,000 characters, so a run can list about a hundred tables: one table per training step (as
before) overflowed from step 130 on. Here a table holds a block of `STEPS_PER_TABLE` steps, with a
`step` column, so a 200-step run lists four.

Tables are written whole, never appended (MLflow's `log_table` appends to an existing file): a
block is rebuilt from the run's local step files each time it grows, so sending it again (after a
resume, or from `hackable-rl sync`) cannot duplicate a row.
"""

from __future__ import annotations

import json
import logging
import posixpath
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STEPS_PER_TABLE = 50
"""Training steps per generation table: 64 completions a step make 3,200 rows, a few MB, and a
run of up to about 5,000 steps fits in MLflow's table list."""

EVAL_SAMPLES_TABLE = "eval/samples.json"
"""Every evaluation sample of a run (sampled and greedy, one row each, with `step` and `decoding`),
under the same name in every run so that the "Artifact evaluation" view lines runs up prompt by prompt."""

_LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"
_TAG_BUDGET = 7_500  # MLflow cuts tag values at 8,000 characters; a cut list is invalid JSON


def block_bounds(step: int) -> tuple[int, int]:
    """The first and last step of the block that holds `step` (steps count from 1)."""
    first = (step - 1) // STEPS_PER_TABLE * STEPS_PER_TABLE + 1
    return first, first + STEPS_PER_TABLE - 1


def generations_table(step: int) -> str:
    """The artifact name of the generation table that holds `step`, e.g. generations/steps-00051-00100.json."""
    first, last = block_bounds(step)
    return f"generations/steps-{first:05d}-{last:05d}.json"


def write_table(
    client: Any, run_id: str, rows: list[dict[str, Any]], artifact_file: str, keep_other_steps: bool
) -> None:
    """Writes `rows` as the whole table `artifact_file` of the run and lists it. With
    `keep_other_steps`, rows of the table already logged whose `step` is not among `rows` stay."""
    frame = _frame(rows)
    if keep_other_steps:
        frame = _with_other_steps(client, run_id, artifact_file, frame)
    folder, name = posixpath.split(artifact_file)
    with tempfile.TemporaryDirectory() as scratch:
        local = Path(scratch) / name
        frame.to_json(local, orient="split", index=False, date_format="iso")
        client.log_artifact(run_id, str(local), folder or None)
    _list_table(client, run_id, artifact_file)


def _frame(rows: list[dict[str, Any]]) -> Any:
    # deferred: pandas loads only where a table is written
    import pandas as pd

    return pd.DataFrame([{key: _cell(value) for key, value in row.items()} for row in rows])


def _cell(value: Any) -> Any:
    """Nested values become JSON text so the table stays flat and readable in the UI."""
    return json.dumps(value) if isinstance(value, dict | list) else value


def _with_other_steps(client: Any, run_id: str, artifact_file: str, frame: Any) -> Any:
    # deferred: pandas loads only where a table is written
    import pandas as pd

    folder = posixpath.dirname(artifact_file) or None
    if artifact_file not in {entry.path for entry in client.list_artifacts(run_id, folder)}:
        return frame
    with tempfile.TemporaryDirectory() as scratch:
        logged = pd.read_json(client.download_artifacts(run_id, artifact_file, scratch), orient="split")
    if "step" not in logged.columns or "step" not in frame.columns:
        return frame
    kept = logged[~logged["step"].isin(set(frame["step"]))]
    return pd.concat([kept, frame], ignore_index=True)


def _list_table(client: Any, run_id: str, artifact_file: str) -> None:
    """Adds the table to the run's table list, as MLflow's `log_table` does, unless the list is full:
    then the file stays a plain JSON artifact (the Artifacts tab shows it) and a line says so."""
    listed = json.loads(client.get_run(run_id).data.tags.get(_LOGGED_ARTIFACTS_TAG, "[]"))
    entry = {"path": artifact_file, "type": "table"}
    if entry in listed:
        return
    text = json.dumps([*listed, entry])
    if len(text) > _TAG_BUDGET:
        log.warning("MLflow's table list of run %s is full; %s stays a plain JSON artifact", run_id, artifact_file)
        return
    client.set_tag(run_id, _LOGGED_ARTIFACTS_TAG, text)
