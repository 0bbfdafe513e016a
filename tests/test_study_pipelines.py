"""Each study's dvc.yaml runs exactly the methods its study.yaml declares: a method added to the study
without a stage (or a stage left for a method the study dropped) fails here, not in a half-run study."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(path.parent for path in (ROOT / "pipelines").glob("*/study.yaml") if (path.parent / "dvc.yaml").exists())


def _stage_methods(dvc: dict) -> set[str]:
    """Every `--method X` of the stages' commands, `${item.method}` expanded over the stage's matrix."""
    methods = set()
    for stage in (dvc.get("stages") or {}).values():
        for method in re.findall(r"--method (\S+)", str(stage.get("cmd", ""))):
            if method == "${item.method}":
                methods |= set((stage.get("matrix") or {}).get("method") or [])
            else:
                methods.add(method)
    return methods


@pytest.mark.parametrize("study", STUDIES, ids=[study.name for study in STUDIES])
def test_a_studys_stages_run_the_methods_it_declares(study: Path) -> None:
    declared = set(yaml.safe_load((study / "study.yaml").read_text())["methods"])
    assert _stage_methods(yaml.safe_load((study / "dvc.yaml").read_text())) == declared
