"""Optional extras a setting needs, found before any work: one line naming the pip extra to install.

A setting that needs a package the base install leaves out (vLLM, FlashAttention, Liger kernels, the
PostgreSQL driver of an MLflow store) would otherwise end in the library's traceback, minutes in,
when the model or the store is first used. `check_extras` runs where a command resolves its config.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from hackable_rl.core.errors import UserError

__all__ = ["require_extra", "check_extras", "check_store_extras"]


def require_extra(module: str, extra: str, setting: str) -> None:
    """Refuses `setting` when `module` cannot be imported, naming the extra that brings it."""
    if importlib.util.find_spec(module) is None:
        raise UserError(f"{setting} needs {module}, which is not installed: pip install 'hackable-rl[{extra}]'")


def check_extras(config: Any) -> None:
    """The model and generation settings whose package is an extra."""
    if config.generation.use_vllm:
        require_extra("vllm", "gpu", "generation.use_vllm: true")
    if config.model.attn_implementation == "flash_attention_2":
        require_extra("flash_attn", "gpu", "model.attn_implementation: flash_attention_2")
    if config.model.use_liger == "on":
        require_extra("liger_kernel", "gpu", "model.use_liger: on")


def check_store_extras(uri: str) -> None:
    """An MLflow store on PostgreSQL needs its driver (the `server` extra)."""
    if uri.split(":", 1)[0].split("+", 1)[0] in ("postgresql", "postgres"):
        require_extra("psycopg2", "server", f"MLFLOW_TRACKING_URI {uri.split(':', 1)[0]}://...")
