"""MLflow tracking, the Model Registry and provenance. The only package that imports mlflow."""

from hackable_rl.tracking.opening import attach_tracker, open_tracker, start_tracker
from hackable_rl.tracking.tracker import EVENT_LOG_NAME, Tracker

__all__ = ["EVENT_LOG_NAME", "Tracker", "attach_tracker", "open_tracker", "start_tracker"]
