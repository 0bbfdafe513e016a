"""A permanent checkpoint on its way to the Model Registry, and what the event log and run.json
record of the checkpoints MLflow received.

Training registers nothing: it logs each permanent checkpoint as the artifact folder
`checkpoints/permanent/step-N` of its MLflow run, with `version.json` (a `CheckpointVersion`: the
registered model, tags and description the version will have) inside. Evaluation registers the
checkpoint it evaluated from there (`tracking.models_registry`), so every version in the registry
carries its evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hackable_rl.core.errors import UserError

PERMANENT_ARTIFACTS = "checkpoints/permanent"
VERSION_FILE = "version.json"

# `register`: the event of event logs written when training registered each checkpoint itself. It
# carried the same folder to the same artifact path, so such a run folder resumes and syncs without
# sending its checkpoints twice.
CHECKPOINT_EVENTS = ("checkpoint", "register")


def checkpoint_artifact(step: int) -> str:
    """The artifact folder of the run's permanent checkpoint at `step`."""
    return f"{PERMANENT_ARTIFACTS}/step-{step}"


def artifact_step(path: str) -> int | None:
    """The step of a checkpoint artifact folder (`.../step-N`); None for any other path."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    digits = name.removeprefix("step-")
    return int(digits) if name.startswith("step-") and digits.isdigit() else None


@dataclass(frozen=True)
class CheckpointVersion:
    """The Model Registry version a permanent checkpoint becomes once it is evaluated (or promoted
    with --force): training writes it as `version.json` into the checkpoint's artifact folder."""

    model: str
    """The registered model: `<tracking.registered_model_name>-<condition>` of the training run."""
    tags: dict[str, str]
    """The run's identity and the checkpoint's `step`, as text (the registry stores text)."""
    description: str
    """The first line of the version's description (relative paths only); evaluation adds its numbers."""

    @classmethod
    def of(cls, model: str, tags: Mapping[str, Any], description: str) -> CheckpointVersion:
        """Tags as the registry stores them: text as it is, anything else as JSON; an unknown value
        (None: the run id of a run trained offline) is left out, evaluation sets it."""
        text = {key: value if isinstance(value, str) else json.dumps(value)
                for key, value in tags.items() if value is not None}
        return cls(model, text, description)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "tags": self.tags, "description": self.description}

    @classmethod
    def from_json(cls, data: Any, where: str) -> CheckpointVersion:
        """The version `where` (a file or an event) describes; anything else is a UserError naming it."""
        fields = {"model": str, "tags": dict, "description": str}
        if not isinstance(data, dict) or any(not isinstance(data.get(key), kind) for key, kind in fields.items()):
            raise UserError(f"{where}: expected an object with model (text), tags (an object) and description "
                            f"(text); not a {VERSION_FILE} of hackable-rl")
        return cls.of(data["model"], data["tags"], data["description"])


def checkpoint_artifacts(events: list[dict[str, Any]]) -> dict[str, str | None]:
    """Step (text) -> artifact folder in the MLflow run of every permanent checkpoint an event log
    sent, null while MLflow has not received it. The step's latest event decides: a checkpoint
    abandoned on resume and saved again is MLflow's only once the new one is delivered."""
    found: dict[int, str | None] = {}
    for event in events:
        step = artifact_step(event["artifact_path"]) if event["event"] in CHECKPOINT_EVENTS else None
        if step is not None:
            found[step] = event["artifact_path"] if event.get("delivered") else None
    return {str(step): found[step] for step in sorted(found)}


def without_registered_versions(info: Mapping[str, Any]) -> dict[str, Any]:
    """run.json without `registered_versions`, the step -> version map of run folders from when
    training registered its checkpoints: the registry keeps those versions, and their nulls would
    wait for a sync that no longer registers; `checkpoint_artifacts` records the checkpoints now."""
    return {key: value for key, value in info.items() if key != "registered_versions"}
