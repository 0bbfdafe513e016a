"""MLflow's sampler of CPU, memory, disk and network use (`system/*`) for one run.

It samples every 10 s while the run lasts, when psutil is installed, and once more as the run ends:
MLflow's sampler drops the window it is in when stopped, so a run shorter than its interval would
otherwise show no system metrics at all. It logs live, not at checkpoints: after a resume its points
continue from the last step it logged, and nothing of it is in the run's event log.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any


def available() -> bool:
    return importlib.util.find_spec("psutil") is not None


def start_sampler(run_id: str, uri: str, resumed: bool) -> Any:
    """A started sampler for the run (resumed: its steps continue from the last one logged)."""
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no start/stop lines
    monitor = SystemMetricsMonitor(run_id, resume_logging=resumed, tracking_uri=uri)
    monitor.start()
    return monitor


def log_last_sample(monitor: Any) -> None:
    """Logs one last sample, taken now, after the stopped sampler's own."""
    monitor.collect_metrics()
    monitor.publish_metrics(monitor.aggregate_metrics())
    monitor.mlflow_logger.flush()
