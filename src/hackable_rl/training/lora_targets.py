"""`lora.target_modules` and `lora.top_layers` checked against the loaded policy before TRL wraps it: PEFT would fail
inside the trainer's constructor with a traceback, after the run folder was made."""

from __future__ import annotations

from typing import Any

from hackable_rl.core.errors import UserError


def check_lora_targets(config: Any, model: Any) -> None:
    """A UserError naming `lora.target_modules` for a name that matches no module of `model` (PEFT
    matches a name to a module whose dotted path is the name or ends with `.name`)."""
    if not config.lora.enabled:
        return
    blocks = model.config.get_text_config().num_hidden_layers
    if config.lora.top_layers is not None and config.lora.top_layers > blocks:
        raise UserError(f"lora.top_layers: {config.lora.top_layers} is more than the policy's {blocks} blocks")
    names = [name for name, _ in model.named_modules() if name]
    for target in config.lora.target_modules:
        if not any(name == target or name.endswith(f".{target}") for name in names):
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                             if type(module).__name__ == "Linear"})
            raise UserError(f"lora.target_modules: {target!r} is no module of the policy; its linear layers are "
                            f"{', '.join(linear)}")
