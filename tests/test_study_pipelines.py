"""Each study's dvc.yaml runs exactly the methods its study.yaml declares: a method added to the study
without a stage (or a stage left for a method the study dropped) fails here, not in a half-run study."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from hackable_rl.config.study import load_study

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(path.parent for path in (ROOT / "pipelines").glob("*/study.yaml") if (path.parent / "dvc.yaml").exists())


def _stage_methods(dvc: dict, reference_method: str) -> set[str]:
    """Every `--method X` of the stages' commands, `${item.method}` expanded over the stage's matrix
    and `${reference_method}` to the study's."""
    methods = set()
    for stage in (dvc.get("stages") or {}).values():
        for method in re.findall(r"--method (\S+)", str(stage.get("cmd", ""))):
            if method == "${item.method}":
                methods |= set((stage.get("matrix") or {}).get("method") or [])
            else:
                methods.add(reference_method if method == "${reference_method}" else method)
    return methods


@pytest.mark.parametrize("study", STUDIES, ids=[study.name for study in STUDIES])
def test_a_studys_stages_run_the_methods_it_declares(study: Path) -> None:
    declared = load_study(study / "study.yaml")
    assert _stage_methods(yaml.safe_load((study / "dvc.yaml").read_text()), declared.reference_method) == set(declared.methods)


@pytest.mark.parametrize("study", STUDIES, ids=[study.name for study in STUDIES])
def test_the_reference_stage_reads_its_method_from_the_study(study: Path) -> None:
    stages = yaml.safe_load((study / "dvc.yaml").read_text())["stages"]
    assert "--method ${reference_method} " in stages["reference"]["cmd"]
