"""The typed study file (`config.study.StudyFile`): every committed study parses and declares its
report kind, a typo is refused with the nearest name, and no other module reads study.yaml itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hackable_rl.config.study import REPORT_KINDS, StudyFile, load_study, load_study_declaration
from hackable_rl.core.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "hackable_rl"
STUDIES = sorted((REPO / "pipelines").glob("*/study.yaml"))

YAML_READERS = {
    "config/study.py": "the study schema itself",
    "config/pilots.py": "the pilots file (pilots.yaml: its grid and rule)",
    "config/loading.py": "params.yaml (the experiment config)",
    "report/conditions.py": "a study's params.yaml and dvc.lock (the warm start's recipe and hash)",
    "alarm/bench/runs.py": "a study's params.yaml (the warm start's name)",
    "study/stale.py": "a study's dvc.lock",
    "training/resume_guard.py": "a checkpoint's saved config",
    "evaluation/stage/targets.py": "an MLflow run's config.yaml",
    "tracking/provenance.py": "dvc.yaml's stage names",
}
"""Every module that parses YAML, and what it parses: none of it is a study file."""


@pytest.mark.parametrize("study_file", STUDIES, ids=lambda path: path.parent.name)
def test_every_committed_study_parses_and_declares_its_report_kind(study_file: Path) -> None:
    study = load_study_declaration(study_file)
    assert study.report_kind in REPORT_KINDS
    assert study.seeds and study.primary_outcomes and set(study.family) <= set(study.primary_outcomes)


def test_no_module_but_the_schema_reads_a_study_file_as_yaml() -> None:
    readers = {}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if re.search(r"\bread_yaml\(|yaml\.safe_load\(", text.replace("def read_yaml(", "")):
            readers[str(path.relative_to(SRC))] = path
    assert sorted(readers) == sorted(YAML_READERS), "a new YAML reader: if it reads study.yaml, use load_study"
    assert not any("read_study_file" in path.read_text() for path in SRC.rglob("*.py"))


@pytest.mark.parametrize(("text", "problem"), [
    ("famliy: [a]\n", "famliy: unknown key (did you mean family?"),
    ("report: real_model\n", "report: unknown key (did you mean report_kind?"),
    ("report_kind: blind_spot\n", "report_kind: 'blind_spot' is not allowed"),
    ("methods: [base, baseline]\ncells: {k1: [clean]}\nbaseline_cells: [k9]\n", "baseline_cells: k9 not among cells"),
    ("cells: {k1: []}\n", "cells.k1 must be a non-empty list of checker names"),
    ("cells: {j: {fpr: 0.3}}\n", r"cells.j must be {fpr: P, fnr: P}"),
    ("cells: {j: {fpr: 0.3, fnr: 0.3, members: 0}}\n", "cells.j.members must be a whole number of members, 1 or more"),
    ("cells: {j: {fpr: 0.3, fnr: 0.3, member: 3}}\n", r"cells.j must be {fpr: P, fnr: P}"),
    ("deviations: [{change: affine_twins_out_of_holm, reason: after the data}]\n", "deviations.0.date: required key"),
    ("deviations: [{date: '2026-12-06', change: affine_twins_out_of_holm, reason: ' '}]\n",
     "deviations.0.reason: say why the analysis changed"),
])
def test_a_wrong_key_or_value_is_one_line_naming_the_file_and_field(tmp_path: Path, text: str, problem: str) -> None:
    study_file = tmp_path / "study.yaml"
    study_file.write_text(text)
    with pytest.raises(UserError) as caught:
        load_study(study_file)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(f"{study_file}: {problem}")


def test_method_cells_keys_are_gathered_and_an_edit_is_read_again(tmp_path: Path) -> None:
    study_file = tmp_path / "study.yaml"
    study_file.write_text("methods: [base, baseline, corrected]\ncells: {a: {fpr: 0.1, fnr: 0.1}, b: [clean]}\n"
                          "corrected_cells: [a]\n")
    study = load_study(study_file)
    assert study.method_cells == {"corrected": ["a"]} and study.trained_methods() == ["baseline", "corrected"]
    assert isinstance(study, StudyFile) and list(study.grid_cells()) == ["a", "b"]
    study_file.write_text("methods: [base, baseline]\ncells: {a: [clean]}\nreference: {cell: clean, members: [clean]}\n")
    assert list(load_study(study_file).grid_cells()) == ["a", "clean"]  # the cache keys on the file's content


def test_a_missing_study_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such study file"):
        load_study(tmp_path / "nowhere.yaml")


def test_a_noisy_ensemble_cell_gives_each_of_its_members_its_own_flips(tmp_path: Path) -> None:
    from hackable_rl.study.cells import cell_overrides, read_cell

    study_file = tmp_path / "study.yaml"
    study_file.write_text("methods: [base, baseline, robust]\ncells: {one: {fpr: 0.4, fnr: 0.4}, "
                          "ens: {fpr: 0.4, fnr: 0.4, members: 3}}\nrobust_cells: [ens]\n"
                          "reference: {cell: clean, members: [clean]}\n")
    assert load_study(study_file).trained_arms() == 4  # baseline in both cells, robust in one, the reference
    one, ens = read_cell(study_file, "one"), read_cell(study_file, "ens")
    assert not any(text.startswith("verifier.members=") for text in cell_overrides(one))  # the params file's
    members = [text for text in cell_overrides(ens) if text.startswith("verifier.members=")]
    assert members == ['verifier.members=[{"name": "m0", "checker": "clean", "corrupted": true}, '
                       '{"name": "m1", "checker": "clean", "corrupted": true}, '
                       '{"name": "m2", "checker": "clean", "corrupted": true}]']
