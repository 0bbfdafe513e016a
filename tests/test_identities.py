"""Arms identical by construction are found before training, trained once and never tested; a study
declares its replicates and Holm family, and `validate --study` refuses one that does not."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.payoff.identities import Arm, affine_arms, affine_map, identical_arms
from hackable_rl.payoff.table import PayoffCell

DECLARED = """
seeds: [0, 1, 2, 3, 4]
primary_outcomes: [positive_control_exploit_share, mitigation_by_k]
family: [positive_control_exploit_share, mitigation_by_k]
"""
BLIND_SPOTS = DECLARED + """
report_kind: blind_spots
exploited_flaw: master_key
cells:
  k1: [master_key, any_box, any_box]
  k2: [master_key, master_key, any_box]
  k3: [master_key, master_key, master_key]
reference: {cell: clean, members: [clean, clean, clean]}
methods: [base, baseline, baseline_majority, robust]
method_overrides:
  baseline_majority: [method=baseline, verifier.aggregation=majority]
"""
SECONDS_SCALE = ["tracking.enabled=false", "trainer.max_steps=2", "trainer.permanent_steps=[2]",
                 "objective.rewards=[correctness_reward]", "report.outcomes=outcomes.json"]


def _cell(cell: str, method: str, rewards: tuple[float, ...], setup: str = "same", refused: str | None = None) -> PayoffCell:
    return PayoffCell(None, 0.0, method, {}, refused, cell, None, rewards, setup)


def test_arms_that_pay_every_completion_alike_are_one_class_led_by_the_first_method() -> None:
    cells = [_cell("k2", "baseline", (1, 0, 1)), _cell("k2", "majority", (1, 1, 1)),
             _cell("k3", "baseline", (1, 1, 1)), _cell("k3", "majority", (1, 1, 1))]
    found = {(i.arm, i.same_as) for i in identical_arms(cells, ["baseline", "majority"])}
    # k3 baseline leads its class although k2 majority comes first in the table: baseline is the first method
    assert found == {(Arm("k2", "majority"), Arm("k3", "baseline")), (Arm("k3", "majority"), Arm("k3", "baseline"))}


def test_equal_rewards_under_a_different_training_setup_or_a_refusal_are_not_identical() -> None:
    cells = [_cell("k3", "baseline", (1, 1)), _cell("k3", "slow", (1, 1), setup="other"),
             _cell("k3", "refused", (1, 1), refused="cannot run here"), _cell("k1", "baseline", (1, 0))]
    assert identical_arms(cells, ["baseline", "slow", "refused"]) == []


# Two prompt groups (p, q) of three priced completions each.
GROUPS = ("p", "p", "p", "q", "q", "q")
BASE = (1.0, 0.0, 0.5, 1.0, 1.0, 0.0)


def _priced(method: str, rewards: tuple[float, ...], advantage=("none", 0.0), cell: str = "k3") -> PayoffCell:
    return PayoffCell(None, 0.0, method, {}, None, cell, None, rewards, "same", GROUPS, advantage)


def test_a_scale_and_shift_of_every_reward_is_found_affine_and_trained_but_listed() -> None:
    scaled = tuple(2.5 * r - 0.4 for r in BASE)
    found = affine_arms([_priced("baseline", BASE), _priced("corrected", scaled)], ["baseline", "corrected"])
    assert [(i.arm, i.same_as) for i in found] == [(Arm("k3", "corrected"), Arm("k3", "baseline"))]
    assert found[0].as_json()["relation"] == "one positive scale (2.5) and a shift per prompt group"
    assert identical_arms(
        [_priced("baseline", BASE), _priced("corrected", scaled)], ["baseline", "corrected"]) == []
    assert affine_map(BASE, scaled, GROUPS, ("none", 0.0)).startswith("one positive scale (2.5)")


def test_a_shift_per_prompt_group_leaves_the_advantages_unless_the_batch_is_standardised() -> None:
    shifted = tuple(r + (0.3 if g == "p" else -0.2) for r, g in zip(BASE, GROUPS, strict=True))
    assert affine_map(BASE, shifted, GROUPS, ("none", 0.0)) == "a shift per prompt group"
    assert affine_map(BASE, shifted, GROUPS, ("group", 0.0)) is not None
    assert affine_map(BASE, shifted, GROUPS, ("batch", 0.0)) is None  # the batch's std sees the shifts


def test_a_scale_per_prompt_group_is_affine_only_where_each_group_is_standardised() -> None:
    per_group = tuple(r * (3.0 if g == "p" else 0.5) for r, g in zip(BASE, GROUPS, strict=True))
    assert affine_map(BASE, per_group, GROUPS, ("group", 0.0)) == "positive scale and shift per prompt group"
    assert affine_map(BASE, per_group, GROUPS, ("none", 0.0)) is None  # the groups' advantages reweighted


def test_a_negative_scale_a_kl_term_or_another_ranking_is_no_twin() -> None:
    assert affine_map(BASE, tuple(-r for r in BASE), GROUPS, ("group", 0.0)) is None
    assert affine_map(BASE, tuple(2 * r for r in BASE), GROUPS, ("none", 0.04)) is None  # beta's term unscaled
    assert affine_map(BASE, tuple(r + 1 for r in BASE), GROUPS, ("none", 0.04)) == "a shift per prompt group"
    reordered = (0.0, 1.0, 0.5, 1.0, 1.0, 0.0)
    assert affine_map(BASE, reordered, GROUPS, ("group", 0.0)) is None
    assert affine_map(BASE, (None, *BASE[1:]), GROUPS, ("none", 0.0)) is None  # unpriced where the other is priced


def test_affine_arms_need_the_same_cell_and_setup() -> None:
    doubled = tuple(2 * r for r in BASE)
    other_cell = affine_arms([_priced("baseline", BASE), _priced("corrected", doubled, cell="k2")],
                             ["baseline", "corrected"])
    other_setup = affine_arms([_priced("baseline", BASE), PayoffCell(None, 0.0, "corrected", {}, None, "k3", None,
                                                                       doubled, "other", GROUPS)],
                              ["baseline", "corrected"])
    assert other_cell == [] and other_setup == []


def _run(*args: str, seconds_scale: bool = True) -> str:
    settings = [part for setting in SECONDS_SCALE for part in ("--set", setting)] if seconds_scale else []
    result = CliRunner().invoke(app, [*args, *settings])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_payoff_stage_finds_the_blind_spot_identities_and_the_identical_arm_is_not_trained(project) -> None:
    (project / "study.yaml").write_text(BLIND_SPOTS)
    output = _run("payoff", "--study", "study.yaml", "--prompts", "8", "--out", "results/payoff.json")
    found = {(e["cell"], e["method"], e["same_as"]["cell"], e["same_as"]["method"])
             for e in json.loads((project / "results/payoff.json").read_text())["identical_arms"]}
    # 2-of-3 over [mk, mk, any_box] is mk's reward; every method is the same reward where all three carry mk
    assert found == {("k2", "baseline_majority", "k3", "baseline"), ("k3", "baseline_majority", "k3", "baseline"),
                     ("k3", "robust", "k3", "baseline")}
    assert "identical by construction: k3 robust = k3 baseline" in output

    for method, cell in [("base", "k3"), ("baseline", "k2"), ("baseline", "k3"), ("baseline_majority", "k2")]:
        _run("condition", "--method", method, "--study", "study.yaml", "--cell", cell,
             "--payoff", "results/payoff.json", "--out", f"results/{cell}/{method}-s0")
    twin = json.loads((project / "results/k2/baseline_majority-s0/condition.json").read_text())
    assert twin["status"] == "identical" and twin["identical_to"]["folder"] == "../../k3/baseline-s0"
    assert not (project / "results/k2/baseline_majority-s0/prompts.jsonl").exists()  # nothing was trained

    _run("report", "--study", "results", "--out", "reports")
    outcomes = json.loads((project / "outcomes.json").read_text())
    majority = next(o for o in outcomes if o["cell"] == "k2" and o["a"] == "baseline_majority" and o["metric"] == "exploit_share")
    assert majority["per_replicate"] == [0.0] and majority["p_holm"] is None  # listed, never tested
    assert "identical by construction" in (project / "reports/report.md").read_text()


@pytest.mark.parametrize(("change", "field"), [
    (lambda text: text.replace("family: [positive_control_exploit_share, mitigation_by_k]\n", ""), "family: required key is missing"),
    (lambda text: text.replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2]"),
     "seeds: 3 replicates, but the primary outcomes are declared with 5 (primary_replicates)"),
    (lambda text: text.replace("family: [positive_control_exploit_share, mitigation_by_k]", "family: [onset_alarm]"),
     "family: onset_alarm not among primary_outcomes"),
    (lambda text: text + "primary_replicates: 3\n",
     "primary_replicates: 3 is below the spec's 5; declare why in small_n_reason, or run 5"),
    (lambda text: text + "primary_replicates: 1\nsmall_n_reason: budget\n", "primary_replicates: got 1 (int); expected greater than or equal to 2"),
    (lambda text: text + "deviations: [{change: affine_twins_out_of_holm, reason: seen after the data}]\n",
     "deviations.0.date: required key is missing"),
    (lambda text: text + "deviations: [{date: '2026-12-06', change: affine_twins_out_of_holm}]\n",
     "deviations.0.reason: required key is missing"),
    (lambda text: text + "deviations: [{date: '2026-12-06', change: affine_twins_out_of_holm, reason: ' '}]\n",
     "deviations.0.reason: say why the analysis changed"),
])
def test_validate_refuses_a_study_without_its_declarations_in_one_line(project, fresh_logging, change, field) -> None:
    (project / "study.yaml").write_text(change(BLIND_SPOTS))
    result = CliRunner().invoke(app, ["validate", "--study", "study.yaml"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error")]
    assert lines == [f"error: study.yaml: {field}"], result.output


def test_a_small_n_is_accepted_with_its_reason(project, fresh_logging) -> None:
    (project / "study.yaml").write_text(BLIND_SPOTS.replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2]")
                                        + "primary_replicates: 3\nsmall_n_reason: the budget holds 3\n")
    result = CliRunner().invoke(app, ["validate", "--study", "study.yaml"])
    assert result.exit_code == 0, result.output


def test_validate_accepts_a_declared_study(project, fresh_logging) -> None:
    (project / "study.yaml").write_text(BLIND_SPOTS)
    result = CliRunner().invoke(app, ["validate", "--study", "study.yaml"])
    assert result.exit_code == 0, result.output
    assert "study.yaml: valid (10 trained arms, 5 replicates" in result.output


def test_holm_runs_over_the_declared_family_only(tmp_path) -> None:
    from hackable_rl.report.declared import Outcome, declared_family, in_declared_family, with_holm

    def outcome(name: str, p: float) -> Outcome:
        return Outcome(name, "k1", "a", f"b-{name}", "pass_at_1", 0.5, 0.4, 0.1, 0.05, 0.15, "above, ci_low > 0",
                       True, 5, (0.1, 0.1, 0.09, 0.11, 0.1), p_value=p)

    (tmp_path / "study.yaml").write_text(DECLARED.replace("family: [positive_control_exploit_share, mitigation_by_k]",
                                                          "family: [mitigation_by_k]"))
    family = declared_family(tmp_path / "study.yaml")
    adjusted = with_holm(in_declared_family([outcome("mitigation_by_k", 0.02), outcome("positive_control_exploit_share", 0.01)],
                                            family))
    in_family, secondary = adjusted
    assert family == ["mitigation_by_k"]
    assert in_family.p_holm == pytest.approx(0.02)  # a family of one: Holm leaves it as it is
    assert secondary.secondary and secondary.p_holm is None and secondary.met_after_holm is None  # not adjusted
