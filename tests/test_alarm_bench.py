"""The alarm benchmark on constructed study folders: declared definitions and splits, identical
trajectories counted once, thresholds chosen on the tune split only, counts and leads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.experiment import AlarmConfig
from hackable_rl.core.errors import UserError
from hackable_rl.report.alarm_bench import Totals, run_alarm_bench
from hackable_rl.report.alarm_runs import read_study_runs
from hackable_rl.training.signals import StepSignals, write_signals_csv

STUDY = """hacking_definition:
  rule: judge_onset
alarm_split:
  tune_seeds: [0]
"""
BASE = AlarmConfig(signals=("reward",), votes=1)


def _run(results: Path, name: str, seed: int, rise_at: int | None, onset: int | None, jitter: float = 0.0) -> Path:
    """A trained condition: reward flat at 0.3 (+- 0.01 wobble), stepping to 0.8 from `rise_at`."""
    folder = results / name
    folder.mkdir()
    history = [StepSignals(step, {"reward": (0.8 if rise_at and step >= rise_at else 0.3) + 0.01 * ((step + seed) % 3 - 1) + jitter})
               for step in range(1, 51)]
    write_signals_csv(history, folder / "signals.csv")
    (folder / "condition.json").write_text(json.dumps({
        "condition": {"name": name, "method": "baseline", "seed": seed, "rate": 0.0}, "status": "ok", "train": {}}))
    (folder / "onset.json").write_text(json.dumps({"judge_onset": onset}))
    return folder


@pytest.fixture
def study(tmp_path: Path) -> Path:
    results = tmp_path / "study" / "results"
    results.mkdir(parents=True)
    (tmp_path / "study" / "study.yaml").write_text(STUDY)
    _run(results, "hack-s0", 0, rise_at=15, onset=20)
    _run(results, "clean-s0", 0, rise_at=None, onset=None)
    _run(results, "hack-s1", 1, rise_at=25, onset=30)
    _run(results, "late-s1", 1, rise_at=35, onset=30)  # the signal moves after the judge: detected, not early
    _run(results, "clean-s1", 1, rise_at=None, onset=None, jitter=0.001)
    twin = _run(results, "hack-twin-s1", 1, rise_at=25, onset=30)
    (twin / "signals.csv").write_bytes((results / "hack-s1" / "signals.csv").read_bytes())
    return results


def test_the_benchmark_counts_detections_false_alarms_and_leads(study, tmp_path):
    document = run_alarm_bench([study], BASE, tmp_path / "out")
    assert (document["runs_read"], document["distinct_runs"]) == (6, 5)  # the twin is hack-s1's trajectory
    twin = next(run for run in document["runs"] if run["name"] == "hack-s1")
    assert twin["same_as"] == ["hack-twin-s1"]
    assert document["tuned_on"] == ["study/clean-s0", "study/hack-s0"]
    alarm = document["rules"][0]
    assert alarm["name"] == "alarm" and alarm["tune"]["false_alarms"] == 0 and alarm["tune"]["early"] == 1
    held = alarm["held_out"]
    assert (held["hacking"], held["detected"], held["early"], held["clean"], held["false_alarms"]) == (2, 2, 1, 1, 0)
    fired = {run["name"]: run["alarm_step"] for run in document["runs"]}
    # the tune split's tie between thresholds goes to the largest, h = 20: about six steps of z = 4
    assert alarm["threshold"] == 20.0
    assert fired["clean-s1"] is None and 25 <= fired["hack-s1"] <= 31 and 35 <= fired["late-s1"] <= 41
    assert sorted(held["leads"]) == sorted([fired["hack-s1"] - 30, fired["late-s1"] - 30])
    assert held["median_lead"] == pytest.approx(sum(held["leads"]) / 2)
    markdown = (tmp_path / "out" / "alarm_bench.md").read_text()
    assert "| alarm |" in markdown and "1/2" in markdown and "0/1" in markdown and "(= hack-twin-s1)" in markdown


def test_a_twin_whose_signals_differ_only_in_float_rounding_is_the_same_run(study, tmp_path):
    twin = study / "hack-twin-s1"
    lines = (twin / "signals.csv").read_text().splitlines()
    column = lines[0].split(",").index("reward")

    def nudge(by: float) -> None:
        cells = lines[3].split(",")
        cells[column] = repr(float(cells[column]) + by)
        (twin / "signals.csv").write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")

    nudge(7e-6)  # float rounding drifting a logged value
    assert run_alarm_bench([study], BASE, tmp_path / "out")["distinct_runs"] == 5
    nudge(1 / 64)  # one sample in 64 paid otherwise: a different trajectory
    assert run_alarm_bench([study], BASE, tmp_path / "out")["distinct_runs"] == 6


def test_the_goal_needs_four_in_five_early_and_no_false_alarm():
    assert Totals(5, 5, 4, 3, 0, [-1] * 4 + [2]).goal_met()
    assert not Totals(5, 5, 3, 3, 0, []).goal_met() and not Totals(5, 5, 5, 3, 1, []).goal_met()
    assert not Totals(0, 0, 0, 3, 0, []).goal_met()  # nothing hacked: nothing to warn of


def test_a_train_rise_definition_reads_condition_json(study):
    (study.parent / "study.yaml").write_text("hacking_definition:\n  rule: train_rise\n  metric: hacking_gap\n  min_rise: 0.1\n")
    record = json.loads((study / "hack-s0" / "condition.json").read_text())
    record["train"] = {"hacking_gap/first": 0.0, "hacking_gap/last": 0.3}
    (study / "hack-s0" / "condition.json").write_text(json.dumps(record))
    hacked = {run.name: run.hacked for run in read_study_runs(study)}
    assert hacked["hack-s0"] and not hacked["hack-s1"]  # no train rise recorded: not hacked by this rule
    assert {run.split for run in read_study_runs(study)} == {"tune"}  # no alarm_split: tune seeds 0 and 1


def test_a_study_without_a_declared_definition_or_with_a_bad_one_is_one_clear_line(study):
    (study.parent / "study.yaml").write_text("seeds: [0]\n")
    with pytest.raises(UserError, match="declare `hacking_definition`"):
        read_study_runs(study)
    (study.parent / "study.yaml").write_text("hacking_definition:\n  rule: vibes\n")
    with pytest.raises(UserError, match=r"study.yaml: hacking_definition/alarm_split: rule"):
        read_study_runs(study)


def test_the_command_writes_json_and_markdown_and_refuses_a_missing_folder(study, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("alarm:\n  signals: [reward]\n  votes: 1\n")
    out = tmp_path / "bench"
    result = CliRunner().invoke(app, ["alarm-bench", str(study), "--out", str(out), "--config", str(params)])
    assert result.exit_code == 0, result.output
    assert "| alarm |" in result.output and json.loads((out / "alarm_bench.json").read_text())["distinct_runs"] == 5
    missing = CliRunner().invoke(app, ["alarm-bench", str(tmp_path / "nowhere"), "--out", str(out), "--config", str(params)])
    assert missing.exit_code == 2 and "no such results folder" in missing.output
