"""Optional extras a setting needs, found before any work: one line naming the pip extra to install.

A setting that needs a package the base install leaves out (vLLM, FlashAttention, Liger kernels,
bitsandbytes' 8-bit optimizers, the database driver of an MLflow store) would otherwise end in the library's traceback, minutes in,
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
    if "bnb" in config.trainer.optimizer:  # transformers imports bitsandbytes when the optimizer is built
        require_extra("bitsandbytes", "gpu", f"trainer.optimizer: {config.trainer.optimizer}")


DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "mssql", "sqlite")
"""The URI schemes MLflow opens as a SQLAlchemy database store (`<dialect>[+<driver>]://...`)."""


def check_store_extras(uri: str) -> None:
    """A database store needs the driver SQLAlchemy picks for its URI (postgresql:// means psycopg, not
    the psycopg2 the `server` extra brings; mysql:// means MySQLdb): asked of SQLAlchemy itself, so any
    dialect and driver is checked, and refused with one line before any work."""
    scheme = uri.split(":", 1)[0]
    if scheme.split("+", 1)[0] not in DATABASE_SCHEMES:
        return
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    shown = f"MLFLOW_TRACKING_URI {scheme}://..."
    try:
        make_url(uri.replace("postgres://", "postgresql://", 1)).get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError) as error:
        raise UserError(f"{shown}: SQLAlchemy cannot open it ({error})") from None
    except ImportError as error:
        missing = getattr(error, "name", None) or str(error)
        if missing == "psycopg2":
            install = "pip install 'hackable-rl[server]'"
        else:
            install = f"install it, or name a driver that is installed in the URI ({_installed_hint(scheme)})"
        raise UserError(f"{shown}: SQLAlchemy's driver for it, {missing}, is not installed: {install}") from None


def _installed_hint(scheme: str) -> str:
    if scheme in ("postgresql", "postgres") and importlib.util.find_spec("psycopg2") is not None:
        return "postgresql+psycopg2://..., the `server` extra's driver"
    return "<dialect>+<driver>://..."
