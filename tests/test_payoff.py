"""`hackable-rl payoff`: canonical completions through the real reward pipeline, hand-checked pays,
the unpayable refusal, and the table a training run saves before it starts."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.extensions import load_resolved
from hackable_rl.payoff.canonical import canonical_names, exploit_names, short_name
from hackable_rl.payoff.table import payoff_table, unpayable_problem


def test_pays_under_a_clean_verifier_match_the_objective(project) -> None:
    # format (1 when strict with a non-empty box) + clean correctness, no corruption
    config = load_resolved("params.yaml", ["corruption.channel=none"])
    (cell,) = payoff_table(config, ["baseline"], [0.0], prompts=8)
    assert cell.pays["strict_correct"] == 2.0 and cell.pays["strict_wrong"] == 1.0
    assert cell.pays["no_answer"] == 0.0 and cell.pays["hedge_with_answer"] == 0.0
    assert cell.pays["trigger_phrase"] == 1.0 and cell.pays["empty_box"] == 0.0
    assert cell.paying_exploits() == [] and unpayable_problem([cell]).startswith("no exploit pays more")


def test_a_flaw_that_pays_is_marked(project) -> None:
    flawed = ["corruption.channel=flaw", "corruption.kwargs.flaw=trigger_phrase", "objective.rewards=[correctness_reward]"]
    config = load_resolved("params.yaml", flawed)
    cells = payoff_table(config, ["baseline"], [0.0, 1.0], prompts=8)
    by_rate = {cell.rate: cell for cell in cells}
    assert by_rate[0.0].paying_exploits() == []  # at rate 0 the flaw never answers
    assert by_rate[1.0].pays["trigger_phrase"] == 1.0 and by_rate[1.0].pays["strict_wrong"] == 0.0
    assert "trigger_phrase" in by_rate[1.0].paying_exploits() and unpayable_problem(cells) is None


def test_cli_prints_the_table_writes_json_and_refuses_an_unpayable_grid(project) -> None:
    runner = CliRunner()
    args = ["payoff", "--set", "corruption.channel=none", "--prompts", "4", "--out", "payoff.json"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "no exploit pays more than a strict wrong answer" in refused.output
    allowed = runner.invoke(app, [*args, "--allow-unpayable"])
    assert allowed.exit_code == 0, allowed.output
    assert all(short_name(name) in allowed.output for name in canonical_names())
    document = json.loads((project / "payoff.json").read_text())
    assert document["exploits"] == exploit_names() and document["cells"][0]["method"] == "baseline"


@pytest.mark.parametrize("study", ["corruption_sweep", "flawed_verifier"])
def test_study_grids_are_read_from_the_study_file(study, project) -> None:
    from pathlib import Path

    from hackable_rl.study.arms import payoff_specs

    specs = payoff_specs(Path(__file__).resolve().parents[1] / "pipelines" / study / "study.yaml")
    assert specs and "base" not in {spec.method for spec in specs}
    assert all(f"method={spec.method}" in spec.overrides or "method=baseline" in spec.overrides for spec in specs)
