"""The schema's field types that are more than a bound (the numeric bounds are in
`hackable_rl.bounds`): folder names, and optimizer and scheduler names with their aliases.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from hackable_rl.storage import folder_name_problem

__all__ = ["FolderName", "Optimizer", "Scheduler"]


def _folder_name(value: str) -> str:
    # Run and dataset names become folders that `train --overwrite` and `prepare` rewrite: one
    # path component only, so `../somewhere` can never point a deletion outside the cache.
    problem = folder_name_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return value


FolderName = Annotated[str, AfterValidator(_folder_name)]

_OPTIMIZER_ALIASES = {
    "adamw": "adamw_torch",
    "adamw_torch": "adamw_torch",
    "adamw_hf": "adamw_torch",
    "adam": "adamw_torch",
    "adamw_torch_fused": "adamw_torch_fused",
    "adamw_8bit": "adamw_bnb_8bit",
    "adamw_bnb_8bit": "adamw_bnb_8bit",
    "sgd": "sgd",
    "adafactor": "adafactor",
}
_SCHEDULER_ALIASES = {
    "constant": "constant",
    "constant_with_warmup": "constant_with_warmup",
    "linear": "linear",
    "cosine": "cosine",
    "cosine_with_restarts": "cosine_with_restarts",
    "polynomial": "polynomial",
}


def _alias(table: dict[str, str], what: str):
    def normalise(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.strip().lower().replace("-", "_")
        if key not in table:
            allowed = ", ".join(sorted(set(table)))
            raise ValueError(f"{value!r} is not a known {what} (allowed: {allowed})")
        return table[key]

    return BeforeValidator(normalise)


Optimizer = Annotated[str, _alias(_OPTIMIZER_ALIASES, "optimizer")]
Scheduler = Annotated[str, _alias(_SCHEDULER_ALIASES, "scheduler")]
