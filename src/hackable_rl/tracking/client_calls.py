"""The MLflow client calls the tracker makes that are more than one line: batched params and
metrics, a model version, a dataset input, a create that may race another run's, and the run
description's sections (used by `tracking.tracker`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["create_model_version", "with_section"]


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:6000]


def _log_batch(client: Any, run_id: str, **items: Any) -> None:
    # MLflow caps one batch at 100 params / 1000 metrics: send in slices.
    for key, values in items.items():
        for start in range(0, len(values), 100):
            client.log_batch(run_id, **{key: values[start : start + 100]})


def create_model_version(
    client: Any, run_id: str, name: str, artifact_path: str, tags: Mapping[str, Any], description: str
) -> str:
    """Registers the run's artifact folder `artifact_path` as a new version of model `name` (created
    if absent); returns the version number."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        _create_if_absent(lambda: client.create_registered_model(name))
    source = f"{client.get_run(run_id).info.artifact_uri}/{artifact_path}"
    version = client.create_model_version(
        name, source=source, run_id=run_id, tags={k: _param_text(v) for k, v in tags.items()},
        description=description or None,
    )
    return str(version.version)


def _log_input(
    client: Any, run_id: str, name: str, digest: str, source: str, context: str, profile: dict[str, Any]
) -> None:
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.entities import Dataset, DatasetInput, InputTag

    dataset = Dataset(name=name, digest=digest, source_type="local", source=source, profile=json.dumps(profile))
    inputs = [DatasetInput(dataset, tags=[InputTag("mlflow.data.context", context)])]
    try:
        client.log_inputs(run_id, inputs)
    except Exception as error:
        # Two runs started side by side (`hackable-rl seeds`) log the same new dataset at once: the
        # store checks that it is absent, then inserts, so the second insert hits the unique key
        # (SQLite: "UNIQUE constraint failed"; PostgreSQL: "violates unique constraint").
        # The row exists now; logging again only links it to this run.
        if "unique constraint" not in str(error).lower():
            raise
        client.log_inputs(run_id, inputs)


def _create_if_absent(create: Any) -> Any | None:
    """What `create` returns, or None when the store already holds the object. Two runs started at
    once against a new store both find no experiment (or registered model), then both create it: the
    second create fails on the unique name, and would switch that run offline for good."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException

    try:
        return create()
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    return None


_NOTE_TAG = "mlflow.note.content"  # what the UI shows, and edits, as the run's description


def with_section(description: str, title: str, body: str) -> str:
    """`description` (markdown) with section `### title` set to `body`: replaced where it exists,
    appended otherwise; the other sections are kept as they are."""
    preamble, *sections = ("\n" + description).split("\n### ")
    kept = [part.rstrip() for part in sections if part.split("\n", 1)[0].strip() != title]
    parts = [preamble.strip()] if preamble.strip() else []
    parts += [f"### {part}" for part in [*kept, f"{title}\n{body.rstrip()}"]]
    return "\n\n".join(parts) + "\n"
