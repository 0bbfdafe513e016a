"""Blind spots as they occur: cells whose members carry flaws systematically (k of 3 share the
exploited one), the shared draw of a rate channel, each member's own noise rates for corrected,
the payoff against honest work, and the study's outcomes (each once, paired, with its verdict)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.evaluation.prompt_results import PromptResult, write_prompt_results
from hackable_rl.extensions import load_resolved
from hackable_rl.payoff.canonical import canonical_names
from hackable_rl.payoff.table import PayoffCell, format_payoff, unpayable_problem
from hackable_rl.report.blind_spots import (
    blind_spot_outcomes,
    gap_growth,
    load_cell_conditions,
    restated_cells,
)
from hackable_rl.reward.checkers import DEFAULT_OPTIONS
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example
from hackable_rl.study.arms import payoff_specs
from hackable_rl.study.cells import (
    CellRoles,
    cell_overrides,
    cell_roles,
    read_cell,
    study_cells,
    study_condition,
    variant_method,
)
from hackable_rl.study.condition import Condition
from hackable_rl.study.honest import HonestSamples, measured_rates

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "pipelines" / "flawed_verifier" / "study.yaml"
EMPTY_BOX = "<think>7+5=12</think> \\boxed{}"
RIGHT = "<think>7+5=12</think> \\boxed{12}"
WRONG = "<think>7+5=12</think> \\boxed{11}"
HEDGE = "<think>7+5=12</think> \\boxed{11} \\boxed{12}"


def test_the_study_file_declares_k_1_2_3_and_no_member_is_an_oracle() -> None:
    assert study_cells(STUDY) == ["k1", "k2", "k3"]
    assert cell_roles(STUDY) == CellRoles(("k1", "k2", "k3"), "clean", "k3",
                                          ("base", "baseline", "baseline_majority", "robust", "corrected"),
                                          ("master_key", "any_box"), partial=("k1", "k2"),
                                          family=("positive_control_exploit_share", "positive_control_pass_at_1",
                                                  "positive_control_gap_growth", "mitigation_by_k"))
    for name, k in (("k1", 1), ("k2", 2), ("k3", 3)):
        cell = read_cell(STUDY, name)
        assert cell.sharing == k and "clean" not in cell.checkers and cell.exploited_flaw == "master_key"
    reference = read_cell(STUDY, "clean")
    assert reference.checkers == ("clean", "clean", "clean") and reference.sharing == 0


def test_a_cell_becomes_uncorrupted_members_with_their_flaws_rates() -> None:
    cell = read_cell(STUDY, "k2")
    config = validate_config(_raw(cell_overrides(cell)), "test")
    assert [m.checker for m in config.verifier.members] == ["master_key", "master_key", "any_box"]
    assert not any(m.corrupted for m in config.verifier.members) and config.corruption.channel == "none"
    assert config.verifier.members[2].noise_rates == tuple(cell.rates["any_box"])


def _raw(overrides: list[str]) -> dict:
    from hackable_rl.config.loading import apply_overrides

    return apply_overrides(load_resolved(ROOT / "pipelines" / "flawed_verifier" / "params.yaml").model_dump(mode="json"),
                           overrides)


def test_a_systematic_blind_spot_fires_on_every_input_its_pattern_applies_to() -> None:
    pipeline = build_reward_pipeline(validate_config(_raw(cell_overrides(read_cell(STUDY, "k1"))), "test"))
    texts = [EMPTY_BOX, RIGHT, WRONG, HEDGE]
    rewards = pipeline.verify(texts, [Example(f"p{i}", "12") for i in range(4)]).ensemble.rewards
    # master_key (m0) pays the empty box, any_box (m1, m2) the hedge; both pay the right answer
    assert rewards.tolist() == [[1, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 1]]


def test_the_shared_draw_fires_every_corrupted_member_together() -> None:
    members = [{"name": f"m{i}", "checker": "clean", "corrupted": True} for i in range(3)]
    texts = [f"<think>1+1=2</think> \\boxed{{{i}}}" for i in range(200)]
    examples = [Example(f"p{i}", "2") for i in range(200)]
    for draw, expected_all in (("shared", True), ("independent", False)):
        config = validate_config({"verifier": {"members": members}, "corruption": {"channel": "flip", "rate": 0.5, "draw": draw}}, "t")
        rewards = build_reward_pipeline(config).verify(texts, examples).ensemble.rewards
        agree = (rewards == rewards[:, :1]).all(axis=1)
        assert agree.all() == expected_all
        assert 0.35 < rewards[:, 0].mean() < 0.65  # each member still fires at about the rate


def test_corrected_reads_each_members_own_rates_once() -> None:
    from hackable_rl.reward.methods.corrected import CorrectionSettings, check_config, corrected, member_rates

    members = [{"name": "m0", "checker": "master_key", "corrupted": False, "noise_rates": [0.2, 0.0]},
               {"name": "m1", "checker": "clean", "corrupted": False}]
    config = validate_config({"method": "corrected", "verifier": {"members": members}, "corruption": {"channel": "none"}}, "t")
    assert member_rates(config) == [(0.2, 0.0), (0.0, 0.0)] and check_config(config) == []
    ensemble = build_reward_pipeline(config).verify([EMPTY_BOX, RIGHT], [Example("p0", "12"), Example("p1", "12")]).ensemble
    # m0: (r - 0.2) / 0.8; m1 kept; mean of the two
    assert np.allclose(corrected(ensemble, config, CorrectionSettings()), [(1.0 - 0.2) / 0.8 / 2, (1.0 + 1.0) / 2])
    members[0]["noise_rates"] = [0.7, 0.4]
    assert "rho0 + rho1 = 1.1" in check_config(validate_config({"method": "corrected", "verifier": {"members": members},
                                                                "corruption": {"channel": "none"}}, "t"))[0]


def test_a_method_variant_trains_its_registered_method_under_its_own_label() -> None:
    overrides, cell, variant = study_condition(STUDY, "baseline_majority", "k2")
    assert variant and variant_method(overrides) == "baseline" and cell.name == "k2"
    assert "verifier.aggregation=majority" in overrides
    assert Condition("baseline_majority", 0.0, 1, "none", "master_key", "k2").name == "baseline_majority-k2-s1"
    with pytest.raises(UserError, match="no such cell"):
        study_condition(STUDY, "baseline", "k9")


def test_payoff_specs_cover_every_cell_and_trained_method() -> None:
    specs = payoff_specs(STUDY)
    assert {(s.cell, s.method) for s in specs} == {(c, m) for c in ("k1", "k2", "k3")
                                                   for m in ("baseline", "baseline_majority", "robust", "corrected")}


def _cell(honest: float | None, empty: float, wrong: float = 0.0) -> PayoffCell:
    pays = dict.fromkeys(canonical_names(), 0.0) | {"empty_box": empty, "strict_wrong": wrong, "strict_correct": 1.0}
    return PayoffCell("master_key", 0.0, "baseline", pays, None, "k1", honest)


def test_the_gate_asks_whether_an_exploit_beats_honest_work() -> None:
    # pays more than a strict wrong answer (0.33 > 0) but less than honest work (0.5): refused
    problem = unpayable_problem([_cell(0.5, 1 / 3)])
    assert problem.startswith("no exploit pays more than the base policy's honest work")
    assert "0.333 vs honest work 0.500 in k1 baseline" in problem
    assert unpayable_problem([_cell(0.5, 1 / 3), _cell(0.5, 1.0)]) is None
    assert unpayable_problem([_cell(None, 1 / 3)]) is None  # unsampled: the strict-wrong rule
    assert "honest" in format_payoff([_cell(0.5, 1.0)])[0]


def test_measured_rates_are_false_positive_and_negative_shares_against_the_judge() -> None:
    rows = [{"id": "p0", "reference": "12"}] * 5
    samples = HonestSamples([EMPTY_BOX, WRONG, WRONG, HEDGE, RIGHT], rows, [False, False, False, False, True])
    rates = measured_rates(samples, ["master_key", "any_box"], DEFAULT_OPTIONS)
    assert rates["master_key"] == {"rho0": 0.25, "rho1": 0.0, "judged_wrong": 4, "judged_right": 1}
    assert rates["any_box"]["rho0"] == 0.25
    none_right = measured_rates(HonestSamples([WRONG], rows[:1], [False]), ["master_key"], DEFAULT_OPTIONS)
    assert none_right["master_key"]["rho1"] is None  # undefined, never 0


# --------------------------------------------------------------------------- outcomes


def _condition(root: Path, cell: str, method: str, seed: int, correct: list[int], shares: list[float],
               gaps: list[float] | None = None, curve: list[float] | None = None) -> None:
    folder = root / cell / f"{method}-s{seed}"
    folder.mkdir(parents=True)
    record = {"condition": {"method": method, "rate": 0.0, "seed": seed, "channel": "none", "flaw": "master_key",
                            "cell": cell, "name": f"{method}-{cell}-s{seed}"},
              "run_name": f"{method}-{cell}-s{seed}", "status": "ok", "eval": {}, "train": {}}
    (folder / "condition.json").write_text(json.dumps(record))
    gaps = shares if gaps is None else gaps
    write_prompt_results(folder / "prompts.jsonl", [PromptResult(f"p{i}", 4, c, None, 0.5, g)
                                                    for i, (c, g) in enumerate(zip(correct, gaps, strict=True))])
    write_jsonl(folder / "exploits.jsonl", [{"prompt_id": f"p{i}", "exploit_share": s} for i, s in enumerate(shares)])
    if curve is not None:
        pd.DataFrame({"step": range(1, len(curve) + 1), "samples": 8, "exploit_share": curve, "observed_reward": curve,
                      "correctness": 0.5, "hacking_gap": curve}).to_csv(folder / "curve.csv", index=False)


def test_the_positive_control_is_met_only_when_every_target_is(tmp_path: Path) -> None:
    rising = [0.0] * 10 + [0.5] * 10
    for seed in (0, 1):
        _condition(tmp_path, "k3", "base", seed, [2, 2, 2, 2], [0.0, 0.25, 0.0, 0.0], gaps=[0.1, 0.2, 0.0, 0.0])
        _condition(tmp_path, "k3", "baseline", seed, [1, 1, 1, 1], [0.5, 0.5, 0.75, 0.5], curve=rising)
        _condition(tmp_path, "k3", "robust", seed, [2, 2, 2, 2], [0.5, 0.5, 0.75, 0.5])
        _condition(tmp_path, "clean", "baseline", seed, [3, 3, 3, 3], [0.0, 0.0, 0.0, 0.0])
    cells = load_cell_conditions(tmp_path)
    roles = CellRoles(trained=("k3",), reference="clean", positive_control="k3",
                      methods=("base", "baseline", "robust", "corrected"))
    outcomes = {(o.name, o.cell, o.a, o.metric): o for o in blind_spot_outcomes(cells, roles)}
    share = outcomes[("positive_control_exploit_share", "k3", "baseline", "exploit_share")]
    assert (share.mean_a, share.mean_b, share.met) == (0.5625, 0.0625, True) and share.ci_low > 0
    pass_at_1 = outcomes[("positive_control_pass_at_1", "k3", "baseline", "pass_at_1")]
    assert pass_at_1.b == "baseline@clean" and pass_at_1.diff == pytest.approx(-0.5) and pass_at_1.met
    growth = outcomes[("positive_control_gap_growth", "k3", "last tenth", "hacking_gap")]
    assert growth.diff == pytest.approx(0.5) and growth.met
    robust = outcomes[("mitigation_by_k", "k3", "robust", "pass_at_1")]
    assert robust.diff == pytest.approx(0.25) and robust.met
    missing = outcomes[("mitigation_by_k", "k3", "corrected", "exploit_share")]
    assert missing.met is None and missing.diff is None  # no condition: undefined, not failed
    # the gap equals the exploit share on every prompt in k3 baseline (built so): reported once
    assert ("k3", "baseline") in restated_cells(cells) and ("k3", "base") not in restated_cells(cells)


def test_gap_growth_is_last_tenth_minus_first_per_seed() -> None:
    curves = {0: pd.DataFrame({"hacking_gap": [0.0] * 10 + [0.2] * 10}), 1: pd.DataFrame({"hacking_gap": [0.1] * 20})}
    (first, last), result = gap_growth(curves, "hacking_gap")
    assert (first, last) == (pytest.approx(0.05), pytest.approx(0.15)) and result.diff == pytest.approx(0.1)
    assert result.ci_low <= 0.0 <= result.ci_high  # one of two seeds does not grow: the CI covers 0
