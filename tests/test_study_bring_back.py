"""scripts/study_bring_back.py: a study worktree's finished conditions and warm-start metrics come back into
the checkout, and the two dvc.lock files merge without losing a stage only the checkout records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dvc.utils.serialize import dump_yaml, load_yaml

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "study_bring_back.py"


def _stage(md5: str) -> dict:
    return {"cmd": "hackable-rl condition", "outs": [{"path": "results", "md5": md5}]}


def _study(folder: Path, stages: dict, results: dict[str, str], metrics: dict[str, str]) -> Path:
    for relative, text in {**results, **metrics}.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    dump_yaml(folder / "dvc.lock", {"schema": "2.0", "stages": stages})
    return folder


def test_finished_conditions_and_metrics_come_back_and_the_locks_merge(tmp_path) -> None:
    worktree = _study(tmp_path / "worktree", {"reference@0": _stage("a"), "reference@1": _stage("b")},
                      {"results/reference/baseline-clean-s0/condition.json": "{}",
                       "results/reference/baseline-clean-s1/condition.json": '{"new": 1}',
                       "results/reference/baseline-clean-s1/prompts.jsonl": "{}\n"},
                      {"metrics/warmstart/s1/warmstart.json": "{}"})
    checkout = _study(tmp_path / "checkout", {"reference@0": _stage("a"), "tiny_flip_cost": _stage("c")},
                      {"results/reference/baseline-clean-s0/condition.json": "{}"}, {})

    done = subprocess.run([sys.executable, str(SCRIPT), str(worktree), str(checkout)], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    assert "1 result folder(s), 1 metrics file(s)" in done.stdout  # s0 is already there, byte for byte
    assert (checkout / "results/reference/baseline-clean-s1/prompts.jsonl").read_text() == "{}\n"
    assert (checkout / "metrics/warmstart/s1/warmstart.json").is_file()
    stages = load_yaml(checkout / "dvc.lock")["stages"]
    assert list(stages) == ["reference@0", "tiny_flip_cost", "reference@1"]  # the checkout's own stage kept
    assert stages["reference@1"]["outs"][0]["md5"] == "b"


def test_a_folder_without_a_dvc_lock_is_refused_in_one_line(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nowhere"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'nowhere'}: no dvc.lock there (a study folder is where its dvc.yaml and dvc.lock are)"
