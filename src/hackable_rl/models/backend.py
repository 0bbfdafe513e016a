"""Attention backend and Liger kernels: the fastest available, chosen once and logged.

FlashAttention-2 needs CUDA and the `flash_attn` package (the `gpu` extra); Liger kernels need
CUDA (Triton) and `liger_kernel`. Everywhere else, PyTorch's SDPA. An explicit choice in the config
that cannot be honoured is a UserError, never a silent downgrade.
"""

from __future__ import annotations

import importlib.util
import logging

from transformers import PreTrainedModel

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError

__all__ = ["choose_attention", "use_liger", "apply_liger"]

log = logging.getLogger(__name__)

_LIGER_PATCHES = {"llama": "apply_liger_kernel_to_llama", "qwen2": "apply_liger_kernel_to_qwen2"}


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def policy_device() -> str:
    """Where a policy runs: `cuda` when torch sees a GPU, else `cpu`. Loading picks the attention
    backend and Liger for this device, so a GPU run gets FlashAttention-2 when it is importable."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_attention(config: ExperimentConfig, device: str) -> str:
    """`model.attn_implementation`, or for `auto`: flash_attention_2 when importable on CUDA, else sdpa."""
    requested = config.model.attn_implementation
    flash_ready = _importable("flash_attn") and _is_cuda(device)
    if requested == "flash_attention_2" and not flash_ready:
        raise UserError(
            f"model.attn_implementation: flash_attention_2 needs CUDA and the flash_attn package "
            f"(device {device!r}, flash_attn importable: {_importable('flash_attn')}); "
            "install the `gpu` extra on a CUDA machine or set it to auto/sdpa"
        )
    if requested != "auto":
        choice = requested
    else:
        choice = "flash_attention_2" if flash_ready else "sdpa"
    log.info("attention backend: %s (model.attn_implementation=%s, device %s)", choice, requested, device)
    return choice


def use_liger(config: ExperimentConfig, device: str) -> bool:
    """Whether to patch in Liger kernels: `auto` when importable on CUDA, `on` demands them."""
    available = _importable("liger_kernel") and _is_cuda(device)
    setting = config.model.use_liger
    if setting == "on" and not available:
        raise UserError(
            f"model.use_liger: on needs CUDA and the liger_kernel package (device {device!r}); "
            "install the `gpu` extra or set it to auto/off"
        )
    chosen = setting == "on" or (setting == "auto" and available)
    log.info("liger kernels: %s (model.use_liger=%s, device %s)", "on" if chosen else "off", setting, device)
    return chosen


def apply_liger(model: PreTrainedModel) -> PreTrainedModel:
    """Patches a Llama or Qwen2 model instance in place with Liger's fused kernels."""
    model_type = model.config.model_type
    if model_type not in _LIGER_PATCHES:
        log.warning("liger kernels: no patch for model type %s; left as it is", model_type)
        return model
    import liger_kernel.transformers as liger  # optional dependency (gpu extra), CUDA only

    getattr(liger, _LIGER_PATCHES[model_type])(model=model)
    return model
