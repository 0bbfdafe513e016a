"""Every committed study's results folder holds what its stages write and nothing an earlier design
left (`study_records.stale`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hackable_rl.study.stale import stale_results

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(path.parent for path in (ROOT / "pipelines").glob("*/dvc.lock") if (path.parent / "results").is_dir())


@pytest.mark.parametrize("study", STUDIES, ids=[study.name for study in STUDIES])
def test_a_committed_study_holds_no_stale_result(study: Path) -> None:
    assert stale_results(study) == []


def test_a_folder_no_stage_owns_and_a_curve_beside_an_untrained_arm_are_stale(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  condition@k3-baseline-0:\n    outs:\n    - path: results/k3/baseline-s0\n"
        "  condition@k3-robust-0:\n    outs:\n    - path: results/k3/robust-s0\n")
    for name, status in (("baseline-s0", "ok"), ("robust-s0", "identical"), ("old_method-s0", "ok")):
        folder = tmp_path / "results" / "k3" / name
        folder.mkdir(parents=True)
        (folder / "condition.json").write_text(json.dumps({"status": status}))
        (folder / "curve.csv").write_text("step\n")
    assert stale_results(tmp_path) == ["results/k3/old_method-s0", "results/k3/old_method-s0/condition.json",
                                       "results/k3/old_method-s0/curve.csv", "results/k3/robust-s0/curve.csv"]


def test_every_committed_result_file_says_which_machine_made_it() -> None:
    """condition.json, eval.json, warmstart.json and payoff.json carry `machine`: the record a stage
    writes (`core.numerics.machine_record`), one recorded afterwards with its source
    (scripts/record_machines.py), or "machine not recorded" (compare.json, with the reason)."""
    import json
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True).stdout
    # every committed file of these names, anywhere: results, pilots, benchmarks, the main job's metrics; not
    # two warm-start records of an earlier design (a single warm start per study) that dvc.lock still hashes
    earlier_design = {"pipelines/corruption_sweep/metrics/warmstart.json", "pipelines/flawed_verifier/metrics/warmstart.json"}
    names = ("condition.json", "eval.json", "warmstart.json", "compare.json", "payoff.json", "train.json", "bf16.json",
             "errors.json")
    files = [root / name for name in tracked.split("\0") if name.endswith(names) and name not in earlier_design]
    assert len(files) > 250
    for path in files:
        record = json.loads(path.read_text()).get("machine")
        assert str(record).startswith("machine not recorded") or (isinstance(record, dict) and (
            "recorded_afterwards_from" in record or {"cpu", "flags", "dispatch", "torch_threads", "torch"} <= set(record))), path


def test_a_payoff_table_names_the_machine_that_sampled_it_or_says_why_not(tmp_path: Path) -> None:
    """The payoff stage samples the base policy for honest work: that table carries the machine record;
    one priced without samples (canonical completions only) carries the constant note."""
    from hackable_rl.core.numerics import MACHINE_KEY
    from hackable_rl.payoff.table import NOT_SAMPLED, PayoffCell, write_payoff

    pays = {"strict_correct": 1.0, "strict_wrong": 0.0}
    sampled = write_payoff(tmp_path / "sampled.json", [PayoffCell(None, 0.2, "baseline", pays, honest=0.4)])
    priced = write_payoff(tmp_path / "priced.json", [PayoffCell(None, 0.2, "baseline", pays)])
    assert {"cpu", "flags", "dispatch", "torch_threads", "torch"} <= set(json.loads(sampled.read_text())[MACHINE_KEY])
    assert json.loads(priced.read_text())[MACHINE_KEY] == NOT_SAMPLED
    assert NOT_SAMPLED.startswith("machine not recorded")
