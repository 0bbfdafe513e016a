"""MLflow as it was after step K, for a run resumed from checkpoint K.

A run killed at step 7 with its last checkpoint at 6 has sent MLflow nothing after step 6 (the
callback sends metrics at checkpoints), so its resume duplicates nothing. A run whose newest
checkpoint is corrupt resumes from the one before it: MLflow then already holds the points of the
steps in between, which the resumed process trains and logs again. MLflow has no call that deletes
a metric point, so for a database store (SQLite, PostgreSQL, MySQL: the client opens it directly)
the points are deleted in the store's own tables; a tracking server cannot be asked to, and a
warning names the steps MLflow will show twice. Registered versions of abandoned permanent
checkpoints (an evaluation registered them) are tagged `abandoned` and kept. MLflow's own system
metrics (`system/*`) count steps of their own and are left alone.
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


def forget_steps_after(tracker: Any, events: list[dict[str, Any]], step: int) -> None:
    """Removes from the tracker's MLflow run what the event log says it received for steps after
    `step` (metric points; registered versions of later checkpoints get the tag `abandoned`)."""
    steps = sent_after(events, step)
    if not tracker.online or not steps:
        return
    tag_abandoned_versions(tracker.client, tracker.run_id, step)
    if not tracker.uri.startswith(_DATABASE_SCHEMES):
        log.warning("MLflow at %s already holds metrics of steps %s, after the resume point %d; a tracking "
                    "server cannot delete metric points, so its charts show those steps twice",
                    tracker.shown_uri, steps, step)
        return
    deleted = _delete_points_after(tracker.client, tracker.run_id, step)
    log.info("MLflow run %s: deleted %d metric points of the abandoned steps %s", tracker.run_id, deleted, steps)


def _delete_points_after(client: Any, run_id: str, step: int) -> int:
    """Deletes the run's metric points after `step` (not `system/*`) and recomputes the latest value
    of each key they touched, as MLflow keeps it."""
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
