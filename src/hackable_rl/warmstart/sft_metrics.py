"""What metrics/warmstart.json holds, and the loud warning when the warm start misses its band.

The predecessor's pilot started from a policy that scored exactly zero, which made every comparison
meaningless; the warm start therefore aims at a band of held-out accuracy (default 40-70%) that
leaves GRPO headroom.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.tracking.provenance import config_hash

__all__ = ["weight_config", "warmstart_config_hash", "loss_summary", "in_band", "warn_if_outside",
           "sft_metrics", "flat_numbers"]

log = logging.getLogger(__name__)

_WEIGHT_SECTIONS = {"seed", "data", "model", "warmstart"}
_HASH_DIGITS = 16  # enough to tell configurations apart in a file a person reads


def weight_config(config: ExperimentConfig) -> dict[str, Any]:
    """The config sections that determine the warm-started weights (seed, data, model, warmstart)."""
    return config.model_dump(mode="json", include=_WEIGHT_SECTIONS)


def warmstart_config_hash(config: ExperimentConfig) -> str:
    """Short hash of `weight_config`: the same value means the same warm-started weights."""
    return config_hash(weight_config(config))[:_HASH_DIGITS]


def loss_summary(losses: list[float], points: int = 10) -> dict[str, Any]:
    """First, last and min loss and `points` window means (the curve without 450 numbers)."""
    if not losses:
        return {"first": None, "last": None, "min": None, "curve": []}
    window = max(1, math.ceil(len(losses) / points))
    curve = [
        {
            "step": min(start + window, len(losses)),
            "loss": sum(losses[start : start + window]) / len(losses[start : start + window]),
        }
        for start in range(0, len(losses), window)
    ]
    return {"first": losses[0], "last": losses[-1], "min": min(losses), "curve": curve}


def in_band(accuracy: float | None, band: tuple[float, float]) -> bool:
    return accuracy is not None and band[0] <= accuracy <= band[1]


def warn_if_outside(accuracy: float | None, band: tuple[float, float], steps: int) -> None:
    """A warning that says which way to move `warmstart.steps` when the accuracy misses the band."""
    if in_band(accuracy, band):
        return
    advice = "raise warmstart.steps" if accuracy is None or accuracy < band[0] else "lower warmstart.steps"
    log.warning(
        "!!! WARM START OUTSIDE THE TARGET BAND: held-out greedy accuracy %s, target [%.2f, %.2f] after %d steps; "
        "%s (or change the task difficulty) so GRPO starts partly capable with headroom",
        "none" if accuracy is None else f"{accuracy:.3f}",
        band[0],
        band[1],
        steps,
        advice,
    )


def sft_metrics(
    config: ExperimentConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sft_examples: int,
    losses: list[float],
    accuracy: dict[str, Any],
) -> dict[str, Any]:
    """What metrics/warmstart.json holds after SFT (timings are added by the caller), in file order."""
    return {
        "source": config.model.source,
        "steps": config.warmstart.steps,
        "seed": config.warmstart_seed,
        "config_hash": warmstart_config_hash(config),
        "parameters": model.num_parameters(),
        "vocab_size": len(tokenizer),
        "sft_examples": sft_examples,
        "loss": loss_summary(losses),
        **accuracy,
        "target_accuracy": list(config.warmstart.target_accuracy),
        "in_target": in_band(accuracy["accuracy"], config.warmstart.target_accuracy),
    }


def flat_numbers(metrics: dict[str, Any], prefix: str = "warmstart/") -> dict[str, float]:
    """The numeric leaves of the metrics as MLflow metric names (curve points left out)."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update(flat_numbers(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[f"{prefix}{key}".replace("=", "_")] = value
    return flat
