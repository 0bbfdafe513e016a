"""Opening a run's tracker: the MLflow client of the configured store (None when unreachable), the
experiment (created as a model-training one, with the runs table's default view), and the run,
started, resumed or attached to (`open_tracker`, `start_tracker`, `attach_tracker`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.client_calls import (
    _create_if_absent,
)
from hackable_rl.tracking.store import (
    artifact_root,
    is_reachable,
    masked_uri,
    quiet_local_transfers,
    store_creation_lock,
    tracking_uri,
)
from hackable_rl.tracking.tracker import Tracker, is_refusal, tracking_errors
from hackable_rl.tracking.views import set_runs_view

log = logging.getLogger(__name__)


def make_client(cache_dir: str | Path) -> tuple[Any | None, str]:
    """An MlflowClient for the configured store, or None (with a warning) when it is unreachable."""
    uri = tracking_uri(cache_dir)
    # A dead server must not stall training for minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    quiet_local_transfers(uri)
    if not is_reachable(uri):
        log.warning("MLflow store %s is unreachable: logging locally only (sync later with `hackable-rl sync`).",
                    masked_uri(uri))
        return None, uri
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow import MlflowClient

    with store_creation_lock(uri):  # the client creates a new SQLite store's tables right here
        return MlflowClient(tracking_uri=uri), uri


# MLflow 3's UI opens an experiment by its kind: GenAI experiments on a traces overview, model
# development ones on the runs table (the UI itself writes this tag when the user picks a kind).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"


MODEL_TRAINING_KIND = "custom_model_development"


def _experiment_id(client: Any, name: str, cache_dir: str | Path, uri: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = artifact_root(cache_dir).as_uri() if uri.startswith("sqlite:") else None
        created = _create_if_absent(
            lambda: client.create_experiment(
                name, artifact_location=location, tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND}
            )
        )
        if created is not None:
            set_runs_view(client, created)
            return created
        experiment = client.get_experiment_by_name(name)  # the one a run started beside this one made
    if EXPERIMENT_KIND_TAG not in experiment.tags:  # made before the tag; a kind the user chose stays
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
    set_runs_view(client, experiment.experiment_id)
    return experiment.experiment_id


@contextmanager
def open_tracker(
    config: Any,
    run_name: str,
    kind: str,
    run_id: str | None = None,
    event_log: Path | None = None,
) -> Iterator[Tracker]:
    """Opens (or, with `run_id`, resumes) one MLflow run; ends it FAILED if the body raises.

    `kind` (warmstart, train, eval) becomes the `hackable_rl.kind` tag. `event_log`, when given,
    receives every event, delivered or not, so `hackable-rl sync` can replay what MLflow missed.
    """
    tracker = start_tracker(config, run_name, kind, run_id, event_log)
    try:
        yield tracker
    except KeyboardInterrupt:
        tracker.end("KILLED")
        raise
    except BaseException:
        tracker.end("FAILED")
        raise
    tracker.end("FINISHED")


def start_tracker(
    config: Any, run_name: str, kind: str, run_id: str | None = None, event_log: Path | None = None
) -> Tracker:
    """Like `open_tracker` without the context: the caller ends the run."""
    cache_dir = config.storage.cache_dir
    if not config.tracking.enabled:
        return Tracker(None, None, event_log, None)
    client, uri = make_client(cache_dir)
    if client is None:
        return Tracker(None, run_id, event_log, uri)
    tracker = Tracker(client, None, event_log, uri)

    def create_or_resume() -> None:
        if run_id is not None:
            client.update_run(run_id, status="RUNNING")
            tracker.run_id = run_id
            return
        experiment_id = _experiment_id(client, config.tracking.experiment_name, cache_dir, uri)
        run = client.create_run(experiment_id, run_name=run_name, tags={"hackable_rl.kind": kind})
        tracker.run_id = run.info.run_id

    try:
        create_or_resume()
    except tracking_errors() as error:
        if is_refusal(error):  # the store answered and said no: a mistake to fix, not an outage
            raise UserError(f"MLflow at {masked_uri(uri)} refused to open the run of experiment "
                            f"{config.tracking.experiment_name!r}: {masked_uri(str(error))}") from None
        log.warning("MLflow at %s could not open a run (%s): logging locally only.", masked_uri(uri),
                    masked_uri(str(error)))
        return Tracker(None, run_id, event_log, uri)
    return tracker


def attach_tracker(config: Any, run_id: str) -> Tracker:
    """A tracker that logs into the existing run `run_id` (an evaluation of a training run) and
    leaves its status and end time as they are: `end()` does not touch it."""
    if not config.tracking.enabled:
        return Tracker(None, None, None, None, owns_run=False)
    client, uri = make_client(config.storage.cache_dir)
    return Tracker(client, run_id, None, uri, owns_run=False)
