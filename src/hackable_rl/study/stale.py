"""Result files a study's current design does not produce (`stale_results`).

A study's results folder should hold exactly what its stages write: one folder per stage output that
dvc.lock records (`results/<cell>/<method>-s<seed>`, `results/reference/...`, `results/payoff.json`),
and, in a folder whose condition.json says the arm was not trained (`identical`: the payoff stage
found it identical by construction to another arm), condition.json alone. Anything else was left by
an earlier design (a folder no stage writes any more, or a curve beside an arm that is no longer
trained) and is read by nobody who should trust it. tests/test_committed_results.py runs this over
every committed study.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

__all__ = ["stale_results"]

UNTRAINED = ("identical",)
"""condition.json statuses of arms that are not trained: their folder holds condition.json alone."""


def _locked_outs(study_dir: Path) -> set[Path]:
    lock = yaml.safe_load((study_dir / "dvc.lock").read_text()) or {}
    return {(study_dir / out["path"]).resolve() for stage in (lock.get("stages") or {}).values()
            for out in stage.get("outs") or []}


def stale_results(study_dir: Path) -> list[str]:
    """Paths (relative to `study_dir`) below results/ that no stage output owns, and files beside the
    condition.json of an untrained arm; empty when the folder is as its stages leave it."""
    study_dir = Path(study_dir)
    results, owned = study_dir / "results", _locked_outs(study_dir)
    stale = []
    for path in sorted(results.rglob("*")):
        resolved = path.resolve()
        if resolved in owned or any(parent in owned for parent in resolved.parents):
            continue
        if path.is_file() or not any(out.is_relative_to(resolved) for out in owned):
            stale.append(path.relative_to(study_dir).as_posix())
    for record in sorted(results.rglob("condition.json")):
        if json.loads(record.read_text()).get("status") in UNTRAINED:
            stale += [extra.relative_to(study_dir).as_posix() for extra in sorted(record.parent.iterdir())
                      if extra.name != "condition.json"]
    return stale
