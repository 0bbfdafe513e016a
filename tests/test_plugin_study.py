"""A researcher's own method and flawed checker are first-class citizens of a study: a tiny blind-spot
study with `tests/plugins/study_plugin.py`'s checker (its canonical exploit) and method (its setting)
runs end to end through the commands a study's DVC stages call (payoff, one condition per cell and
method, report), and no file in src/ names either of them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.extensions import load_resolved
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example
from hackable_rl.study.cells import study_condition

PLUGINS = Path(__file__).parent / "plugins"
SRC = Path(__file__).resolve().parents[1] / "src"
FLAW, METHOD = "study_plugin:magic_word", "study_plugin:disagreement_veto"
STUDY = f"""
report_kind: blind_spots
exploited_flaw: "{FLAW}"
cells:
  k1: ["{FLAW}", clean, clean]
  k3: ["{FLAW}", "{FLAW}", "{FLAW}"]
reference: {{cell: clean, members: [clean, clean, clean]}}
methods: [base, baseline, veto]
method_overrides:
  veto: ["method={METHOD}", "method_kwargs.threshold=0.2"]
seeds: [0, 1, 2, 3, 4]
primary_outcomes: [mitigation_by_k]
family: [mitigation_by_k]
"""
SECONDS_SCALE = ["tracking.enabled=false", "trainer.max_steps=2", "trainer.permanent_steps=[2]",
                 "objective.rewards=[correctness_reward]", "report.outcomes=outcomes.json"]
CONDITIONS = [("base", "k3"), ("baseline", "clean"), ("baseline", "k3"), ("veto", "k3")]


def _run(*args: str) -> str:
    settings = [part for setting in SECONDS_SCALE for part in ("--set", setting)]
    result = CliRunner().invoke(app, [*args, *settings])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_plugin_method_and_checker_run_a_study_end_to_end(project, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    (project / "study.yaml").write_text(STUDY)
    _run("payoff", "--study", "study.yaml", "--prompts", "8", "--out", "results/payoff.json")
    payoff = json.loads((project / "results/payoff.json").read_text())
    k3 = next(cell for cell in payoff["cells"] if cell["cell"] == "k3" and cell["method"] == "baseline")
    assert "magic_word" in payoff["exploits"] and k3["pays"]["magic_word"] > k3["pays"]["strict_wrong"]
    assert "magic_word" in k3["paying_exploits"]  # the payoff prices the plugin's own exploit

    for method, cell in CONDITIONS:
        _run("condition", "--method", method, "--study", "study.yaml", "--cell", cell,
             "--out", f"results/{cell}/{method}-s0")
    for method, cell in CONDITIONS:  # every condition says which machine ran it
        machine = json.loads((project / f"results/{cell}/{method}-s0/condition.json").read_text())["machine"]
        assert machine["cpu"] and machine["dispatch"]["torch_cpu_capability"]
    _run("report", "--study", "results", "--out", "reports")
    report = (project / "reports/report.md").read_text()
    assert "| k3 | veto | 1 |" in report and "magic_word" in report
    assert f"Machines: {machine['cpu']} (" in report and f": {len(CONDITIONS)} conditions." in report
    outcomes = json.loads((project / "outcomes.json").read_text())
    assert any(o["name"] == "mitigation_by_k" and o["a"] == "veto" and o["b"] == "baseline" for o in outcomes)


def test_the_method_setting_reaches_the_method(project, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    (project / "study.yaml").write_text(STUDY)
    overrides, _, _ = study_condition(Path("study.yaml"), "veto", "k1")
    texts = ["<think>abracadabra.</think> \\boxed{8}", "<think>3+4=7</think> \\boxed{7}"]
    examples = [Example("p0", "7"), Example("p1", "7")]
    optimised = {}
    for threshold in (0.2, 0.9):
        config = load_resolved("params.yaml", [*overrides, f"method_kwargs.threshold={threshold}"])
        pipeline = build_reward_pipeline(config)
        assert pipeline.method_settings.threshold == threshold
        optimised[threshold] = pipeline.verify(texts, examples).optimised
    # one of three members pays the magic word (U = 2/3): vetoed under 0.2, paid its 1/3 under 0.9
    np.testing.assert_allclose(optimised[0.2], [0.0, 1.0])
    np.testing.assert_allclose(optimised[0.9], [1 / 3, 1.0])


def test_a_bad_plugin_setting_is_one_line(project, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    result = CliRunner().invoke(app, ["validate", "--set", f"method={METHOD}", "--set", "method_kwargs.treshold=2",
                                      "--set", f"verifier.members=[{{name: m0, checker: '{FLAW}', checker_kwargs: {{wrd: x}}}}]"])
    assert result.exit_code == 2
    assert "method_kwargs.treshold: unknown setting (did you mean threshold? allowed: threshold)" in result.output
    assert "verifier.members[0].checker_kwargs.wrd: unknown setting (did you mean word? allowed: word)" in result.output


def test_no_file_in_src_names_the_plugin() -> None:
    named = [path for path in SRC.rglob("*.py")
             if any(name in path.read_text() for name in ("study_plugin", "magic_word", "disagreement_veto"))]
    assert named == []
