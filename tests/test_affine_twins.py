"""Arms whose rewards are a positive affine map of another arm's (`MethodSpec.affine_to`): the known-rate
correction with one rate for every member is one map a x r + b of baseline's reward (GRPO's centring
removes b, Adam's scaling a), so its comparison with baseline is listed, never tested, and out of Holm."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.registry import METHODS
from hackable_rl.report.declared import Outcome, with_holm
from hackable_rl.report.outcomes_table import outcomes_table
from hackable_rl.reward.methods.corrected import CorrectionSettings, corrected

REPO = Path(__file__).resolve().parents[1]


def _config(rates: list[list[float]], kind: str = "backward", aggregation: str = "mean") -> ExperimentConfig:
    members = [{"name": f"m{i}", "checker": "clean", "corrupted": False, "noise_rates": pair}
               for i, pair in enumerate(rates)]
    return ExperimentConfig.model_validate({"method": "corrected", "method_kwargs": {"kind": kind},
                                            "verifier": {"members": members, "aggregation": aggregation}})


def _rewards(config: ExperimentConfig, seen: np.ndarray) -> np.ndarray:
    ensemble = SimpleNamespace(rewards=seen, confidences=np.ones_like(seen),
                               noise_rates=tuple(tuple(m.noise_rates) for m in config.verifier.members))
    return corrected(ensemble, config, CorrectionSettings.model_validate(config.method_kwargs))


@pytest.mark.parametrize("rates", [[[0.061, 0.0]] * 3, [[0.2, 0.1]] * 3, [[0.0, 0.3]] * 2])
def test_one_rate_for_every_member_is_one_affine_map_of_baselines_reward(rates) -> None:
    config = _config(rates)
    assert METHODS.get("corrected").affine_to(config) == "baseline"
    seen = np.random.default_rng(0).integers(0, 2, size=(64, len(rates))).astype(float)
    baseline = seen.mean(axis=1)
    rho0, rho1 = rates[0]
    scale, shift = 1 / (1 - rho0 - rho1), -rho0 / (1 - rho0 - rho1)  # scale > 0: the map keeps the order
    np.testing.assert_allclose(_rewards(config, seen), scale * baseline + shift, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("rates", "kind", "aggregation"), [
    ([[0.061, 0.0], [0.031, 0.0], [0.031, 0.0]], "backward", "mean"),  # the blind-spot study's k1: two maps
    ([[0.2, 0.1]] * 3, "forward", "mean"),  # the forward weight keeps its group mean: a shift that matters
    ([[0.2, 0.1]] * 3, "backward", "majority"),
])
def test_members_with_other_rates_or_other_corrections_are_no_twin(rates, kind, aggregation) -> None:
    assert METHODS.get("corrected").affine_to(_config(rates, kind, aggregation)) is None


def test_differing_rates_are_not_an_affine_map_on_the_priced_rewards() -> None:
    config = _config([[0.061, 0.0], [0.031, 0.0], [0.031, 0.0]])
    seen = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=float)
    fitted = np.polyfit(seen.mean(axis=1), _rewards(config, seen), 1)
    residual = _rewards(config, seen) - np.polyval(fitted, seen.mean(axis=1))
    assert np.abs(residual).max() > 1e-3  # [1, 0, 0] and [0, 1, 0] share baseline's 1/3 but not the corrected reward


def _outcome(name: str, a: str, p: float, affine: bool = False) -> Outcome:
    return Outcome(name, "k3", a, "baseline", "exploit_share", 0.5, 0.5, -0.1, -0.2, -0.01, "below, ci_high < 0",
                   True, 5, (-0.1,) * 5, p_value=p, affine=affine)


def test_an_affine_comparison_leaves_holms_family_and_the_report_says_what_it_would_change() -> None:
    outcomes = [_outcome("mitigation", "robust", 0.03), _outcome("mitigation", "corrected", 0.04, affine=True)]
    adjusted = with_holm(outcomes)
    assert adjusted[0].p_holm == pytest.approx(0.03) and adjusted[1].p_holm is None  # a family of one
    table = "\n".join(outcomes_table(outcomes))
    assert "affine to baseline by construction (not tested)" in table
    assert "robust - baseline, exploit_share): not met -> met, p (Holm) 0.06 -> 0.03" in table


def test_twins_the_payoff_stage_found_are_marked_without_a_declaration(tmp_path) -> None:
    from hackable_rl.report.declared import with_affine_twins

    results = tmp_path / "results"
    results.mkdir()
    found = [{"cell": "k3", "method": "corrected", "same_as": {"cell": "k3", "method": "baseline"},
              "completions_compared": 12, "relation": "one positive scale (2) and a shift per prompt group"}]
    (results / "affine_arms.json").write_text(json.dumps(found))
    marked = with_affine_twins([_outcome("mitigation", "robust", 0.03), _outcome("mitigation", "corrected", 0.04)],
                               results)
    assert [o.affine for o in marked] == [False, True]


@pytest.mark.parametrize(("study", "found"), [("flawed_verifier", {("k3", "corrected", "baseline")}),
                                              ("natural_hacking", {("k3", "corrected", "baseline")}),
                                              ("natural_dr_grpo", set())])
def test_the_committed_payoff_stages_found_the_declared_twins(study: str, found: set) -> None:
    rows = json.loads((REPO / "pipelines" / study / "results" / "affine_arms.json").read_text())
    assert {(row["cell"], row["method"], row["same_as"]["method"]) for row in rows} == found


@pytest.mark.parametrize(("study", "twins"), [
    ("flawed_verifier", {("k3", "corrected", "baseline")}),
    ("natural_hacking", {("k3", "corrected", "baseline")}),
    ("corruption_sweep", {(cell, "corrected", "baseline") for cell in ("fp0.2-fn0.2", "fp0.3-fn0.1", "fp0.1-fn0.3",
                                                                       "fp0.4-fn0.4")}),
])
def test_the_committed_studies_keep_their_twins_in_the_declared_family_and_drop_them_in_the_amended_one(
        study: str, twins: set) -> None:
    """Each of these studies adopted the affine-twin rule after its data (a dated deviation in study.yaml):
    its declared family still tests the twins, and the amended family beside it leaves them out."""
    from hackable_rl.config.study import load_study
    from hackable_rl.study.arms import affine_twins

    folder = REPO / "pipelines" / study
    assert affine_twins(folder / "study.yaml", folder / "params.yaml") == twins
    assert [d.change for d in load_study(folder / "study.yaml").deviations] == ["affine_twins_out_of_holm"]
    rows = json.loads((folder / "metrics" / "outcomes.json").read_text())
    for row in rows:
        if (row["cell"], row["a"], row["b"]) in twins and not row["secondary"]:
            assert row["affine"] and row["affine_after_data"] and row["p_holm"] is not None, row
            assert row["p_holm_amended"] is None and row["met_after_holm_amended"] is None, row
    in_amended = [row for row in rows if row["p_holm_amended"] is not None]
    assert in_amended and all((row["cell"], row["a"], row["b"]) not in twins for row in in_amended)
    report = (folder / "reports" / "report.md").read_text()
    assert "**Deviation, after the data** (study.yaml `deviations`: affine_twins_out_of_holm)" in report


def test_the_declared_family_leads_and_the_amended_one_stands_beside() -> None:
    """The J sweep's two verdicts that rest on the family: as declared (twins tested) not detected, as
    amended after the data (twins out) detected, both written."""
    rows = json.loads((REPO / "pipelines" / "corruption_sweep" / "metrics" / "outcomes.json").read_text())
    by_cell = {row["cell"]: row for row in rows if row["name"] == "learning_gain" and row["metric"] == "pass_at_1"}
    for cell in ("fp0.4-fn0.4", "fp0.5-fn0.5"):
        assert by_cell[cell]["met_after_holm"] is False and by_cell[cell]["met_after_holm_amended"] is True
        assert by_cell[cell]["p_holm"] > 0.05 > by_cell[cell]["p_holm_amended"]


@pytest.mark.parametrize("study", sorted(p.parent.parent.name for p in (REPO / "pipelines").glob("*/metrics/outcomes.json")))
def test_the_family_size_a_report_states_is_its_outcomes_files(study: str) -> None:
    import re

    folder = REPO / "pipelines" / study
    rows = json.loads((folder / "metrics" / "outcomes.json").read_text())
    adjusted = {(row["cell"], row["a"], row["b"], row["metric"]) for row in rows if row["p_holm"] is not None}
    stated = re.findall(r"\((\d+) p-values here\)", _report_beside_outcomes(folder).read_text())
    assert stated and {int(n) for n in stated} == {len(adjusted)}


def _report_beside_outcomes(folder: Path) -> Path:
    """The report.md the stage writing metrics/outcomes.json writes beside it (its `--out` folder: reports/,
    or reports/study/ where the study's folder also holds its pilots' reports)."""
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    for stage in stages.values():
        outs = [next(iter(out)) if isinstance(out, dict) else out for out in stage.get("outs", [])]
        if "metrics/outcomes.json" in outs:
            return folder / next(out for out in outs if out.startswith("reports")) / "report.md"
    raise AssertionError(f"{folder}/dvc.yaml: no stage writes metrics/outcomes.json")


def test_a_malformed_affine_arms_file_is_one_line_naming_it(tmp_path) -> None:
    from hackable_rl.core.errors import UserError
    from hackable_rl.report.declared import with_affine_twins

    results = tmp_path / "results"
    results.mkdir()
    (results / "affine_arms.json").write_text(json.dumps([{"cell": "k3", "method": "corrected"}]))
    with pytest.raises(UserError, match="affine_arms.json: expected a list of"):
        with_affine_twins([_outcome("mitigation", "corrected", 0.04)], results)
