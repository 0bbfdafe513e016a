"""Registry version numbers as a run's event log and run.json record them: step -> version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def registered_versions(events: list[dict[str, Any]]) -> dict[str, str | None]:
    """Step (text) -> registry version (null while undelivered) of every `register` event of an event
    log; a later event of the same step wins unless it only knows null."""
    found: dict[str, str | None] = {}
    for event in events:
        step = event.get("tags", {}).get("step") if event["event"] == "register" else None
        if step is not None:
            found = merge_versions(found, {str(step): event.get("version")})
    return found


def merge_versions(*sources: Mapping[str, str | None]) -> dict[str, str | None]:
    """The union of step -> version maps, later ones first, except that null never hides a number."""
    merged: dict[str, str | None] = {}
    for source in sources:
        for step, version in source.items():
            if version is not None or step not in merged:
                merged[str(step)] = version
    return dict(sorted(merged.items(), key=lambda item: (len(item[0]), item[0])))  # numeric order of digit strings
