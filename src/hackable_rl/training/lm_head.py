"""The loss's LM head on completion tokens only, on CPU too.

TRL 1.16 computes the GRPO loss's log-probabilities with a fused LM head (`trl.trainer.utils.
add_fused_lm_head`) that projects, tile by tile, only the positions whose label is scored (the
completion tokens) where Triton runs (CUDA, XPU). Elsewhere it projects every position, prompt and
padding included, and masks them afterwards, so that the tile shapes stay fixed for compilers
that would otherwise recompile on every batch. Eager CPU code has no such cost, and for a model
with a large vocabulary (SmolLM2: 49,152 words, about a fifth of its forward's arithmetic) the
projected prompt is pure waste.

`completion_only_head` makes TRL take its compact path on CPU for as long as it is open. The kept
positions' log-probabilities are the same computation on fewer rows; a matrix product of fewer
rows may round differently in the last bit (`tests/test_lm_head.py` bounds the difference).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["completion_only_head"]


@contextmanager
def completion_only_head(enabled: bool = True) -> Iterator[None]:
    """While open, TRL's fused LM head projects only scored positions on every device."""
    if not enabled:
        yield
        return
    import trl.trainer.utils as trl_utils

    original = trl_utils._use_triton  # TRL's choice of the compact path; its kernels keep their own
    trl_utils._use_triton = lambda device: original(device) or device.type == "cpu"
    try:
        yield
    finally:
        trl_utils._use_triton = original
