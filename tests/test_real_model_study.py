"""The real-model study's stages (pipelines/smollm2_study) at seconds scale: its study file, with
the tiny policy standing in for SmolLM2 (the slow test runs SmolLM2 itself), through payoff,
base, the clean reference, the noise and blind-spot cells and the report with its declared
outcomes under both judges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hackable_rl.cli import app

STUDY_FILE = Path(__file__).resolve().parents[1] / "pipelines" / "smollm2_study" / "study.yaml"
SECONDS_SCALE = ["trainer.max_steps=2", "trainer.permanent_steps=[2]", "objective.rewards=[correctness_reward]",
                 "report.outcomes=outcomes.json", "tracking.enabled=false", "warmstart.seed=0", "generation.drop_finished_rows=true", "trainer.head_on_completions=true",
                 "lora.enabled=true", "lora.r=2", "lora.top_layers=1", "evaluation.merge_adapter=true",
                 'verifier.members=[{"name": "m0", "checker": "clean", "corrupted": true}]']


def _run(*args: str, scale: list[str] = SECONDS_SCALE) -> str:
    result = CliRunner().invoke(app, [*args, *(part for s in scale for part in ("--set", s))])
    assert result.exit_code == 0, result.output
    return result.output


def _run_study(project, study_file: Path, arms: list[tuple[str, str]], scale: list[str] = SECONDS_SCALE) -> None:
    """The study's stages at seconds scale, two replicates: payoff, base, the clean reference, each
    (cell, method) arm, the report."""
    study = yaml.safe_load(study_file.read_text())
    (project / "study.yaml").write_text(yaml.safe_dump({**study, "seeds": [0, 1], "primary_replicates": 2,
                                                                "small_n_reason": "budget: a seconds-scale test"}))
    _run("payoff", "--study", "study.yaml", "--prompts", "4", "--honest-samples", "1", "--out", "results/payoff.json",
         "--allow-unpayable", scale=scale)
    for seed in (0, 1):
        _run("condition", "--method", "base", "--study", "study.yaml", "--cell", "blind", "--set", f"seed={seed}",
             "--out", f"results/blind/base-s{seed}", scale=scale)
        _run("condition", "--method", "baseline", "--study", "study.yaml", "--cell", "clean", "--set", f"seed={seed}",
             "--out", f"results/reference/baseline-clean-s{seed}", scale=scale)
        for cell, method in arms:
            _run("condition", "--method", method, "--study", "study.yaml", "--cell", cell, "--set", f"seed={seed}",
                 "--payoff", "results/payoff.json", "--out", f"results/{cell}/{method}-s{seed}", scale=scale)
    _run("report", "--study", "results", "--out", "reports", scale=scale)


@pytest.mark.usefixtures("fresh_logging")
def test_the_real_model_studys_stages_run_and_report_its_declared_outcomes(project) -> None:
    _run_study(project, STUDY_FILE, [("flip0.4", "baseline"), ("blind", "baseline")])

    outcomes = json.loads((project / "outcomes.json").read_text())
    primary = [(o["name"], o["metric"]) for o in outcomes if not o["secondary"]]
    assert primary == [("clean_gain", "pass_at_1"), ("flip_cost", "pass_at_1"), ("pattern_share_rises", "exploit_share"),
                       ("blind_pass_at_1_falls", "pass_at_1")]
    transferred = {o["name"] for o in outcomes if o["metric"] == "pass_at_1_transfer"}
    assert {"clean_gain", "flip_cost", "blind_pass_at_1_falls"} <= transferred  # both judges in every pass@1 row
    assert all(o["n_replicates"] == 2 for o in outcomes if o["diff"] is not None)
    report = (project / "reports/report.md").read_text()
    assert "**Small n: 2 replicates**" in report and "budget" in report


LEARNING_STUDY = STUDY_FILE.parents[1] / "smollm2_learning" / "study.yaml"


@pytest.mark.usefixtures("fresh_logging")
def test_the_learning_studys_stages_run_robust_against_baseline_in_a_noisy_ensemble(project) -> None:
    """pipelines/smollm2_learning's arms at seconds scale: the noisy three-member cell gives the training
    verifier three independently flipped members under both methods, and the report declares
    robust_vs_baseline with greedy accuracy beside every pass@1 row."""
    params = yaml.safe_load((project / "params.yaml").read_text())  # one member, as the study's params.yaml
    params["verifier"]["members"] = [{"name": "m0", "checker": "clean", "corrupted": True}]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run_study(project, LEARNING_STUDY, [("flip0.4", "baseline"), ("blind", "baseline"), ("noisy3", "baseline"),
                                         ("noisy3", "robust")],
               scale=[s for s in SECONDS_SCALE if not s.startswith("verifier.members=")])

    run_config = yaml.safe_load((project / "cache/artifacts/runs/robust-noisy3-s0/config.yaml").read_text())
    assert [m["name"] for m in run_config["verifier"]["members"]] == ["m0", "m1", "m2"]
    assert all(m["corrupted"] and m["checker"] == "clean" for m in run_config["verifier"]["members"])
    assert run_config["corruption"]["kwargs"] == {"fpr": 0.4, "fnr": 0.4}
    outcomes = json.loads((project / "outcomes.json").read_text())
    primary = [(o["name"], o["metric"]) for o in outcomes if not o["secondary"]]
    assert primary == [("clean_gain", "pass_at_1"), ("flip_cost", "pass_at_1"), ("pattern_share_rises", "exploit_share"),
                       ("blind_pass_at_1_falls", "pass_at_1"), ("robust_vs_baseline", "pass_at_1")]
    robust = [o for o in outcomes if o["name"] == "robust_vs_baseline"]
    assert [o["metric"] for o in robust] == ["pass_at_1", "pass_at_1_transfer", "greedy_accuracy"]
    assert robust[0]["cell"] == "noisy3" and (robust[0]["a"], robust[0]["b"]) == ("robust", "baseline")
    assert "±0.020" in robust[0]["equivalence"]  # the declared margin is read
    assert "- robust_vs_baseline in noisy3, robust vs baseline, pass_at_1: " in (project / "reports/report.md").read_text()
    greedy = {o["name"] for o in outcomes if o["metric"] == "greedy_accuracy"}
    assert greedy == {"clean_gain", "flip_cost", "blind_pass_at_1_falls", "robust_vs_baseline"}
    cost = json.loads((project / "reports/cost.json").read_text())  # the study declares budget_hours: what it took
    assert cost["trained_conditions"] == 2 * 5 and cost["base_evaluations"] == 2 and cost["budget_hours"] == 10
    moved = (project / "reports/moved.csv").read_text().splitlines()  # every trained arm against its own base
    assert len(moved) == 1 + 2 * 5 and moved[0].startswith("cell,method,seed,prompts,same_correct")
    assert (project / "reports/learning_curves.png").read_bytes().startswith(b"\x89PNG")
    report = (project / "reports/report.md").read_text()  # every trained arm's first and last tenth, noise cells too
    tenths = report.split("## What training did on its own samples")[1].split("\n## ")[0]
    assert sum(line.startswith("| noisy3 |") for line in tenths.splitlines()) == 2 and "| flip0.4 | baseline | 2 |" in tenths


@pytest.mark.usefixtures("fresh_logging")
def test_a_bfloat16_evaluation_decodes_in_bfloat16_and_scores_every_prompt(project) -> None:
    from hackable_rl.config.loading import load_config
    from hackable_rl.evaluation.stage import evaluate
    from hackable_rl.evaluation.stage.targets import target_from_model

    config = load_config(project / "params.yaml", ["evaluation.dtype=bfloat16", "evaluation.max_prompts=3",
                                                   "evaluation.n=2", "evaluation.k=[1,2]", "tracking.enabled=false"])
    loaded = evaluate._load_for_evaluation(target_from_model(config, None))
    assert {parameter.dtype for parameter in loaded.model.parameters()} == {__import__("torch").bfloat16}
    sampled, greedy = evaluate.sample_and_score(target_from_model(config, None))
    assert len(sampled) == 6 and len(greedy) == 3 and all(isinstance(r["completion"], str) for r in sampled + greedy)
