"""Torch's process-wide settings, chosen deliberately rather than left to defaults.

On a 2-core machine two torch processes with two threads each run far slower than one after the
other (oversubscription), and a thread count that follows the machine changes float reduction
orders between machines. So every stage that runs a model sets the count from `torch_threads`,
and asks torch for deterministic algorithms where it has them (warn-only: an op without a
deterministic kernel still runs, and says so once). Library progress bars are chosen here too.
"""

from __future__ import annotations

import logging

from hackable_rl.config.experiment import ExperimentConfig

log = logging.getLogger(__name__)


def use_torch_settings(config: ExperimentConfig) -> None:
    """Thread count and deterministic algorithms for this process, before any model is built."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch

    if config.torch_threads is not None:
        torch.set_num_threads(config.torch_threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    # Deterministic mode also fills every new uninitialised tensor with NaN, to expose a kernel that
    # reads memory it never wrote. No kernel used here does (the outputs are byte-identical either
    # way), and the fills took a third of a training step's backward (docs/results.md, the profile).
    torch.utils.deterministic.fill_uninitialized_memory = False
    log.debug("torch: %d threads, deterministic algorithms", torch.get_num_threads())


def quiet_library_progress_bars() -> None:
    """transformers' own tqdm bars off for this process: "Loading weights" and "Writing model shards"
    take well under a second on these models, yet each leaves a line (every checkpoint, under DVC as
    carriage-return frames). Loading is logged anyway. Hugging Face Hub download bars stay on: a
    download from the Hub is rare and can take minutes."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from huggingface_hub.utils import enable_progress_bars
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # turns the Hub's bars off as well...
    enable_progress_bars()  # ...so turn those back on
