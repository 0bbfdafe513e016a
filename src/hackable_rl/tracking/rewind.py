"""MLflow as it was after step K, for a run resumed from checkpoint K.

A run killed at step 7 with its last checkpoint at 6 has sent MLflow nothing after step 6 (the
callback sends metrics at checkpoints), so its resume duplicates nothing. A run whose newest
checkpoint is corrupt resumes from the one before it: MLflow then already holds the points of the
steps in between, which the resumed process trains and logs again. MLflow has no call that deletes
a metric point, so for a database store (SQLite, PostgreSQL, MySQL: the client opens it directly)
every point after K is deleted in the store's own tables, whether or not the event log names it; a tracking server cannot be asked to, and a
warning names the steps MLflow will show twice. Registered versions of abandoned permanent
checkpoints (an evaluation registered them) are tagged `abandoned` and kept. MLflow's own system
metrics (`system/*`) count steps of their own and are left alone.

The other way round: a kill between MLflow's receipt of a step's points and their event in the
event log leaves the resumed run thinking they were never sent. The first send after a resume from
checkpoint K therefore asks MLflow which points of steps up to K (not trained again) it already
holds (`points_mlflow_lacks`) and sends only the rest, so none of them is drawn twice on any store.
"""

from __future__ import annotations

import logging
from typing import Any

from hackable_rl.tracking.models_registry import tag_abandoned_versions

log = logging.getLogger(__name__)

_DATABASE_SCHEMES = ("sqlite:", "postgresql", "mysql", "mssql")


def sent_after(events: list[dict[str, Any]], step: int) -> list[int]:
    """Steps after `step` whose metrics the event log says MLflow received."""
    return sorted({e["step"] for e in events if e["event"] == "metrics" and e.get("delivered")
                   and e.get("step") is not None and e["step"] > step})


Point = tuple[int, dict[str, Any]]  # (step, {MLflow key: value})


def points_mlflow_lacks(tracker: Any, points: list[Point]) -> list[Point]:
    """`points` less the (step, key) pairs MLflow already holds; the held ones are recorded in the
    event log as delivered. Offline, or with MLflow unreachable, `points` unchanged."""
    if not tracker.online or not points:
        return points
    held = {key: tracker.metric_steps(key) for key in sorted({key for _, row in points for key in row})}
    lacking = []
    for step, row in points:
        already = {key: value for key, value in row.items() if step in held[key]}
        if already:
            tracker.log_metrics(already, step=step, held=True)
        if missing := {key: value for key, value in row.items() if key not in already}:
            lacking.append((step, missing))
    return lacking


def forget_steps_after(tracker: Any, events: list[dict[str, Any]], step: int) -> None:
    """Removes from the tracker's MLflow run what the event log says it received for steps after
    `step` (metric points; registered versions of later checkpoints get the tag `abandoned`)."""
    if not tracker.online:
        return
    steps = sent_after(events, step)
    if not tracker.uri.startswith(_DATABASE_SCHEMES):
        if steps:
            tag_abandoned_versions(tracker.client, tracker.run_id, step)
            log.warning("MLflow at %s already holds metrics of steps %s, after the resume point %d; a tracking "
                        "server cannot delete metric points, so its charts show those steps twice",
                        tracker.shown_uri, steps, step)
        return
    # A database store is asked, not the event log: a kill between MLflow's receipt of a step's points
    # and their event leaves points the event log does not name.
    tag_abandoned_versions(tracker.client, tracker.run_id, step)
    deleted = _delete_points_after(tracker.client, tracker.run_id, step)
    if deleted:
        log.info("MLflow run %s: deleted %d metric points of the abandoned steps after %d", tracker.run_id, deleted, step)


def _delete_points_after(client: Any, run_id: str, step: int) -> int:
    """Deletes the run's metric points after `step` (not `system/*`) and recomputes the latest value
    of each key they touched, as MLflow keeps it."""
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric

    store = client._tracking_client.store  # the SQLAlchemy store: the only way to delete a point
    with store.ManagedSessionMaker(read_only=False) as session:
        later = session.query(SqlMetric).filter(
            SqlMetric.run_uuid == run_id, SqlMetric.step > step, ~SqlMetric.key.startswith("system/")
        )
        keys = {row.key for row in later}
        deleted = later.delete(synchronize_session=False)
        for key in keys:
            session.query(SqlLatestMetric).filter_by(run_uuid=run_id, key=key).delete(synchronize_session=False)
            latest = (session.query(SqlMetric).filter_by(run_uuid=run_id, key=key)
                      .order_by(SqlMetric.step.desc(), SqlMetric.timestamp.desc(), SqlMetric.value.desc()).first())
            if latest is not None:
                session.add(SqlLatestMetric(run_uuid=run_id, key=key, value=latest.value, timestamp=latest.timestamp,
                                            step=latest.step, is_nan=latest.is_nan))
    return deleted
