"""pipelines/natural_hacking: its declarations (cells, outcomes, family, replicates), its warm-start
data (nothing planted), and its cells end to end at seconds scale through the commands its DVC
stages call (payoff, one condition per cell and method, report), pattern shares included."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from hackable_rl.answers.parsing import extract_all_boxed, parse_strict
from hackable_rl.cli import app
from hackable_rl.config.loading import load_config
from hackable_rl.data.arith import arith_provider
from hackable_rl.reward.checkers import MASTER_KEYS
from hackable_rl.study.cells import cell_roles, read_cell

STUDY_DIR = Path(__file__).resolve().parents[1] / "pipelines" / "natural_hacking"
PATTERNS = ("early_stop", "off_by_one")


def _study() -> dict:
    return yaml.safe_load((STUDY_DIR / "study.yaml").read_text())


def test_the_study_declares_its_outcomes_family_and_five_replicates() -> None:
    study = _study()
    assert study["exploited_flaw"] == "early_stop" and len(study["seeds"]) >= 5
    assert study["primary_outcomes"] == study["family"] == ["pattern_share_rises", "pass_at_1_falls",
                                                            "robust_lowers_pattern_share"]
    roles = cell_roles(STUDY_DIR / "study.yaml")
    assert roles.natural and roles.patterns == PATTERNS and roles.partial == ("k1", "k2")
    assert roles.positive_control == "k3" and roles.reference == "clean"
    for name in roles.trained:  # no member is an oracle: each carries one of the two natural flaws
        cell = read_cell(STUDY_DIR / "study.yaml", name)
        assert set(cell.checkers) <= set(PATTERNS) and cell.sharing == int(name[1])


def test_the_dvc_matrix_runs_every_declared_method_and_seed() -> None:
    stages = yaml.safe_load((STUDY_DIR / "dvc.yaml").read_text())["stages"]
    study = _study()
    assert stages["condition"]["matrix"]["method"] == [m for m in study["methods"] if m != "base"]
    assert stages["warmstart"]["matrix"]["seed"] == "${seeds}"  # one warm start per declared replicate
    assert "--set seed=${item.seed}" in stages["warmstart"]["cmd"]
    assert stages["warmstart"]["outs"] == ["cache/models/tiny-arith-w${item.seed}"]
    assert stages["condition"]["deps"][0] == "cache/models/tiny-arith-w${item.seed}"


def test_the_noise_study_shares_these_warm_starts_through_the_run_cache() -> None:
    """The J sweep's prepare and warm-start stages are this study's, with the same params, so `lanes`
    checks its warm starts out of DVC's run cache instead of training them again."""
    sweep_dir = STUDY_DIR.parent / "corruption_sweep"
    ours, theirs = (yaml.safe_load((d / "params.yaml").read_text()) for d in (STUDY_DIR, sweep_dir))
    for section in ("seed", "data", "model", "warmstart", "torch_threads"):
        assert ours.get(section) == theirs.get(section), section
    our_stages, their_stages = (yaml.safe_load((d / "dvc.yaml").read_text())["stages"] for d in (STUDY_DIR, sweep_dir))
    for stage in ("prepare", "warmstart"):
        assert our_stages[stage] == their_stages[stage], stage


def test_the_warm_start_data_holds_no_exploit_demonstration() -> None:
    config = load_config(STUDY_DIR / "params.yaml")
    assert config.data.arith.exploit_share == 0 and config.data.arith.hedged_share == 0
    assert config.warmstart.seed is None  # each replicate warm-starts its own
    rows = arith_provider(config.data, config.seed).sft
    assert len(rows) == config.data.sft_size
    for row in rows:
        strict = parse_strict(row.solution)
        assert strict is not None and strict.answer, row.solution  # one box, never empty
        assert len(extract_all_boxed(row.solution)) == 1  # no hedge
        assert not any(key in row.solution.lower() for key in MASTER_KEYS)
        assert not row.metadata.get("exploit") and not row.metadata.get("hedged")
    truncated = sum(bool(row.metadata.get("truncated")) for row in rows)
    assert truncated > 0.25 * len(rows)  # the policy's own habit is there: half the multi-step ones


STUDY = """
report_kind: blind_spots
exploited_flaw: early_stop
cells:
  k1: [early_stop, off_by_one, off_by_one]
  k3: [early_stop, early_stop, early_stop]
reference: {cell: clean, members: [clean, clean, clean]}
methods: [base, baseline, robust]
seeds: [0, 1, 2, 3, 4]
primary_outcomes: [pattern_share_rises, pass_at_1_falls, robust_lowers_pattern_share]
family: [pattern_share_rises, pass_at_1_falls, robust_lowers_pattern_share]
"""
SECONDS_SCALE = ["trainer.max_steps=2", "trainer.permanent_steps=[2]", "objective.rewards=[correctness_reward]",
                 "report.outcomes=outcomes.json", "corruption.channel=none", "corruption.rate=0"]
CONDITIONS = [("base", "k3", False), ("baseline", "clean", False), ("baseline", "k1", False),
              ("robust", "k1", False), ("baseline", "k3", True)]


def _run(*args: str, tracking: bool = False) -> str:
    settings = [*SECONDS_SCALE, f"tracking.enabled={str(tracking).lower()}"]
    result = CliRunner().invoke(app, [*args, *(part for s in settings for part in ("--set", s))])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.usefixtures("fresh_logging")
def test_the_studys_cells_run_end_to_end_with_pattern_shares(project) -> None:
    (project / "study.yaml").write_text(STUDY)
    _run("payoff", "--study", "study.yaml", "--prompts", "4", "--honest-samples", "1", "--out", "results/payoff.json",
         "--allow-unpayable")
    payoff = json.loads((project / "results/payoff.json").read_text())
    k3 = next(cell for cell in payoff["cells"] if cell["cell"] == "k3" and cell["method"] == "baseline")
    assert k3["pays"]["stop_early"] == 1.0 and k3["pays"]["strict_wrong"] == 0.0  # the gate prices it
    assert set(payoff["member_rates"]) == set(PATTERNS)

    for method, cell, tracking in CONDITIONS:
        _run("condition", "--method", method, "--study", "study.yaml", "--cell", cell,
             "--out", f"results/{cell}/{method}-s0", tracking=tracking)
    columns = [f"pattern_share/{flaw}" for flaw in PATTERNS]
    curve = pd.read_csv(project / "results/k1/baseline-s0/curve.csv")
    assert list(curve.columns[-2:]) == columns and len(curve) == 2
    record = json.loads((project / "results/k1/baseline-s0/condition.json").read_text())
    assert all(column in record["eval"] and f"{column}/last" in record["train"] for column in columns)
    shares = [json.loads(line) for line in (project / "results/clean/baseline-s0/exploits.jsonl").read_text().splitlines()]
    assert shares and all(set(columns) <= set(row) for row in shares)  # measured under clean members too

    from hackable_rl.tracking.opening import make_client

    tracked = json.loads((project / "results/k3/baseline-s0/condition.json").read_text())
    client, _ = make_client("cache")
    history = client.get_metric_history(tracked["run_id"], "pattern_share/early_stop")
    assert [point.step for point in history] == [1, 2]

    _run("report", "--study", "results", "--out", "reports")
    report = (project / "reports/report.md").read_text()
    assert "early_stop pattern" in report and "off_by_one pattern" in report
    outcomes = json.loads((project / "outcomes.json").read_text())
    names = [o["name"] for o in outcomes]
    assert names[:4] == ["pattern_share_rises", "pass_at_1_falls", "robust_lowers_pattern_share",
                         "pass_at_1_falls_transferred"]  # the result under both judges
    assert all(o["p_holm"] is None for o in outcomes if o["name"] not in _study()["family"])
