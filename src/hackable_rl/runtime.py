"""Torch's process-wide settings, chosen deliberately rather than left to defaults.

On a 2-core machine two torch processes with two threads each run far slower than one after the
other (oversubscription), and a thread count that follows the machine changes float reduction
orders between machines. So every stage that runs a model sets the count from `torch_threads`,
and asks torch for deterministic algorithms where it has them (warn-only: an op without a
deterministic kernel still runs, and says so once).
"""

from __future__ import annotations

import logging

from hackable_rl.config import ExperimentConfig

log = logging.getLogger(__name__)


def use_torch_settings(config: ExperimentConfig) -> None:
    """Thread count and deterministic algorithms for this process, before any model is built."""
    import torch

    if config.torch_threads is not None:
        torch.set_num_threads(config.torch_threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    log.debug("torch: %d threads, deterministic algorithms", torch.get_num_threads())
