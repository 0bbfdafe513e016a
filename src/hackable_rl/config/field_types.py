"""The schema's field types that are more than a bound (the numeric bounds are in
`hackable_rl.core.bounds`): folder names, and optimizer and scheduler names with their aliases.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from hackable_rl.core.storage import folder_name_problem

__all__ = ["ExperimentName", "FolderName", "FolderPath", "ModelName", "Optimizer", "Scheduler", "Tag"]


def _folder_name(value: str) -> str:
    # Run and dataset names become folders that `train --overwrite` and `prepare` rewrite: one
    # path component only, so `../somewhere` can never point a deletion outside the cache.
    problem = folder_name_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return value


FolderName = Annotated[str, AfterValidator(_folder_name)]


def _folder_path(value: str) -> str:
    # An empty path reads as "here": `storage.cache_dir=` would scatter datasets, runs and the MLflow
    # store into the current folder. A folder must be named (`.` where the current one is meant).
    if not value.strip():
        raise ValueError("is empty, which would mean the current folder; name a folder (`.` if that is meant)")
    return value


FolderPath = Annotated[str, AfterValidator(_folder_path)]
"""A folder path (relative or absolute, any depth) that is not empty."""


# MLflow refuses these names only when a run logs into them: an empty experiment name or a registered
# model name with `/` would otherwise send a whole run offline without saying why. Checked at load
# time with MLflow's own rules (mlflow.utils.validation) and the store's column widths.
_EXPERIMENT_NAME_MAX = 256
_MODEL_NAME_MAX = 256 - len("-corrupted")  # the stem gets -clean or -corrupted


def _experiment_name(value: str) -> str:
    if not value.strip():
        raise ValueError(f"{value!r} is empty; MLflow needs an experiment name")
    if len(value) > _EXPERIMENT_NAME_MAX:
        raise ValueError(f"is {len(value)} characters long; MLflow's store keeps at most {_EXPERIMENT_NAME_MAX}")
    return value


def _model_stem(value: str) -> str:
    if not value.strip():
        raise ValueError(f"{value!r} is empty; the Model Registry needs a name")
    if "/" in value or ":" in value:
        raise ValueError(f"{value!r} contains '/' or ':', which the Model Registry refuses in a model name")
    if value.startswith(".") or len(value) > _MODEL_NAME_MAX:
        raise ValueError(f"{value[:40]!r} starts with '.' or is longer than {_MODEL_NAME_MAX} characters; "
                         "the Model Registry refuses it")
    return value


def _tag(value: str) -> str:
    # An empty tag is found everywhere in every completion: every strict parse would fail.
    if not value.strip():
        raise ValueError(f"{value!r} is empty; expected a tag such as <think>")
    return value


ExperimentName = Annotated[str, AfterValidator(_experiment_name)]
ModelName = Annotated[str, AfterValidator(_model_stem)]
Tag = Annotated[str, AfterValidator(_tag)]

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
