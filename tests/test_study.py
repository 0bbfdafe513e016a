"""Study conditions without training: failures are recorded, names are unique, pipeline params validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.evaluation.stage.evaluate import EvalResult
from hackable_rl.extensions import load_resolved
from hackable_rl.study import cells, records
from hackable_rl.study import condition as study
from hackable_rl.study.cells import noise_cells

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted((ROOT / "pipelines").glob("*/params.yaml"))


@pytest.fixture()
def config(tmp_path: Path):
    return load_resolved(ROOT / "params.yaml", [f"storage.cache_dir={tmp_path / 'cache'}", "corruption.rate=0.4", "seed=2"])


def test_every_pipeline_params_file_validates() -> None:
    assert {path.parent.name for path in PIPELINES} >= {"corruption_sweep", "flawed_verifier", "smollm2_gsm8k"}
    for path in PIPELINES:
        cfg = load_resolved(path)
        assert cfg.storage.cache_dir == "cache", path


def test_flawed_verifier_has_no_oracle_and_a_payable_objective() -> None:
    """Every member of every cell carries a flaw systematically (its checker), the reward is accuracy
    only (an exploit keeps its whole reward), and the warm start holds the exploit the policy can copy."""
    folder = ROOT / "pipelines" / "flawed_verifier"
    cfg = load_resolved(folder / "params.yaml")
    assert cfg.corruption.channel == "none" and cfg.objective.rewards == ["correctness_reward"]
    assert cfg.data.arith.exploit_share > 0 and cfg.data.arith.hedged_share > 0
    grid = yaml.safe_load((folder / "study.yaml").read_text())
    assert set(grid["methods"]) == {"base", "baseline", "baseline_majority", "robust", "corrected"}
    assert len(grid["seeds"]) >= 5 and grid["primary_outcomes"] and grid["family"]
    assert cfg.warmstart.seed is None  # every replicate warm-starts its own policy
    for cell in grid["cells"]:
        for method in grid["methods"]:
            overrides, _, _ = cells.study_condition(folder / "study.yaml", method, cell)
            members = load_resolved(folder / "params.yaml", overrides).verifier.members
            assert len(members) == 3 and all(_flawed(m) for m in members), (cell, method)


def _flawed(member) -> bool:
    """A member that can be wrong: corrupted by a channel, or a flawed checker of its own."""
    return member.corrupted or member.checker != "clean"


def test_every_study_file_declares_its_replicates_and_family() -> None:
    from hackable_rl.config.study import load_study_declaration

    for path in PIPELINES:
        if (path.parent / "study.yaml").exists():
            declared = load_study_declaration(path.parent / "study.yaml")
            assert len(declared.seeds) >= 5 or declared.small_n_reason, path


def test_no_study_config_has_an_oracle_member() -> None:
    for path in PIPELINES:
        assert all(_flawed(m) for m in load_resolved(path).verifier.members), path
        grid_file = path.parent / "study.yaml"
        if not grid_file.exists():
            continue
        grid = yaml.safe_load(grid_file.read_text())
        for cell in grid.get("cells") or [None]:
            for method in grid["methods"]:
                overrides = cells.study_condition(grid_file, method, cell)[0]
                members = load_resolved(path, overrides, refusals=False).verifier.members  # as `condition` loads it
                assert all(_flawed(m) for m in members), (path, cell, method)


def test_smollm2_pipeline_warm_starts_on_a_task_it_can_partly_solve() -> None:
    """SmolLM2-135M scores 0 under the strict judge on GSM8K: the pipeline warm-starts it on arithmetic
    worked solutions, gates GRPO on validation pass@k, and names the runs it declares as DVC outputs."""
    folder = ROOT / "pipelines" / "smollm2_gsm8k"
    cfg = load_resolved(folder / "params.yaml")
    assert cfg.model.source == "smollm2-135m-instruct"
    assert (cfg.data.provider, cfg.warmstart.pretrained_sft, cfg.capability.enabled) == ("arith", True, True)
    assert cfg.data.sft_size >= cfg.warmstart.steps * cfg.warmstart.batch_size and cfg.data.validation_size > 0
    outs = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]["train"]["outs"]
    assert outs[0] == f"cache/artifacts/runs/{cfg.run_name}"


def test_the_real_model_study_plants_nothing_and_fits_its_declared_budget() -> None:
    """SmolLM2's study: its own SFT warm start per replicate with no truncated, hedged or exploit
    demonstration, the speed settings the benchmark measured, one member that every cell corrupts or
    flaws, and an estimate inside budget_hours (validate refuses it otherwise)."""
    from hackable_rl.config.study import load_study_declaration
    from hackable_rl.study.budget import study_cost

    folder = ROOT / "pipelines" / "smollm2_study"
    cfg = load_resolved(folder / "params.yaml")
    arith = cfg.data.arith
    assert cfg.model.source == "smollm2-135m-instruct" and cfg.warmstart.pretrained_sft and cfg.warmstart.seed is None
    assert (arith.truncated_share, arith.hedged_share, arith.exploit_share) == (0.0, 0.0, 0.0)
    assert cfg.generation.drop_finished_rows and cfg.trainer.head_on_completions and cfg.lora.top_layers
    declared = load_study_declaration(folder / "study.yaml")
    assert declared.small_n_reason is None and declared.primary_replicates == len(declared.seeds) == 5
    assert set(declared.primary_outcomes) == {"clean_gain", "flip_cost", "pattern_share_rises", "blind_pass_at_1_falls"}
    cost = study_cost(cfg, len(declared.seeds), trained_arms=3)
    assert cost is not None and cost.hours <= declared.budget_hours
    for cell in ("flip0.4", "blind"):
        members = load_resolved(folder / "params.yaml", cells.study_condition(folder / "study.yaml", "baseline", cell)[0]).verifier.members
        assert len(members) == 1 and _flawed(members[0]), cell


def test_the_learning_study_gives_both_methods_the_same_noisy_members_and_fits_its_budget() -> None:
    """smollm2_learning: the same recipe as the 20-step study but for its budget; the noisy ensemble's
    three members are each flipped (none is ever right by construction), the same under baseline and
    robust; its estimate fits budget_hours."""
    from hackable_rl.config.study import load_study_declaration
    from hackable_rl.study.budget import study_cost

    folder = ROOT / "pipelines" / "smollm2_learning"
    study_file = folder / "study.yaml"
    cfg = load_resolved(folder / "params.yaml")
    old = load_resolved(ROOT / "pipelines" / "smollm2_study" / "params.yaml")
    for section in ("data", "model", "warmstart", "generation", "objective", "rewards", "verifier"):
        assert getattr(cfg, section) == getattr(old, section), section  # the same warm starts and members
    declared = load_study_declaration(study_file)
    assert declared.primary_replicates == len(declared.seeds) == 5 and "robust_vs_baseline" in declared.family
    cost = study_cost(cfg, len(declared.seeds), declared.trained_arms())
    assert cost is not None and cost.hours <= declared.budget_hours
    ensemble = {method: load_resolved(folder / "params.yaml", cells.study_condition(study_file, method, "noisy3")[0])
                for method in ("baseline", "robust")}
    assert ensemble["baseline"].verifier.members == ensemble["robust"].verifier.members
    assert len(ensemble["robust"].verifier.members) == 3 and ensemble["robust"].method == "robust"
    assert all(m.corrupted for m in ensemble["robust"].verifier.members)
    assert ensemble["robust"].corruption.channel == "asymmetric" and ensemble["robust"].corruption.rate == 0.4


def test_j_sweep_grid_has_equal_j_pairs_a_negative_j_cell_and_its_controls() -> None:
    folder = ROOT / "pipelines" / "corruption_sweep"
    study_file = folder / "study.yaml"
    grid = yaml.safe_load(study_file.read_text())
    assert grid["methods"] == ["base", "baseline", "corrected"] and grid["seeds"] == [0, 1, 2, 3, 4]
    cells = {cell.name: cell for cell in noise_cells(study_file)}
    assert cells["clean"].youden == 1.0 and cells[grid["random_control"]].youden == 0.0
    assert {0.8, 0.4, 0.2, 0.0} <= {cell.youden for cell in cells.values()}
    assert any(cell.youden < 0 for cell in cells.values())
    for first, second in grid["equal_j"]:  # equal J, another balance of false positives and negatives
        assert cells[first].youden == cells[second].youden and cells[first].fpr != cells[second].fpr
    assert set(grid["baseline_cells"]) == set(grid["cells"])
    assert all(cells[name].youden > 0 for name in grid["corrected_cells"])  # defined only for J > 0
    assert {name for pair in grid["equal_j"] for name in pair} <= set(grid["corrected_cells"])
    members = load_resolved(folder / "params.yaml").verifier.members
    assert len(members) == 3 and all(m.corrupted for m in members)


def test_condition_names_are_unique_per_cell(config) -> None:
    assert study.condition_of(config, "base").name == "base-flip-r0.4-s2"
    flawed = load_resolved(ROOT / "params.yaml", ["corruption.channel=flaw", "corruption.kwargs.flaw=lenient_contains"])
    assert study.condition_of(flawed, "robust").name == "robust-flaw-lenient_contains-r0.2-s0"
    cfg = study.condition_config(config, study.condition_of(config, "robust"))
    assert (cfg.method, cfg.run_name) == ("robust", "robust-flip-r0.4-s2")
    base = study.condition_config(config, study.condition_of(config, "base"))
    assert (base.method, base.run_name) == ("baseline", "base-flip-r0.4-s2")
    with pytest.raises(UserError, match="--method 'grpo': expected one of base, baseline, corrected, robust, a method variant of the study file, or 'package.module:method'"):
        study.condition_of(config, "grpo")


def test_failed_training_is_recorded_not_raised(config, tmp_path: Path, monkeypatch) -> None:
    def broken(cfg, resume="never", overwrite=False, metrics_out=None):
        raise RuntimeError("loss is NaN at step 3")

    monkeypatch.setattr("hackable_rl.training.run.run_training", broken)
    record = study.run_condition(config, "baseline", tmp_path / "out")
    written = json.loads((tmp_path / "out" / "condition.json").read_text())
    assert written == record
    assert written["status"] == "failed"
    assert written["error"] == "RuntimeError: loss is NaN at step 3"
    assert written["condition"] == {"method": "baseline", "rate": 0.4, "seed": 2, "channel": "flip", "flaw": None,
                                    "name": "baseline-flip-r0.4-s2"}
    assert "eval" not in written and "Traceback" in written["traceback"]
    row = records.collect_study([tmp_path / "out" / "condition.json"]).iloc[0]
    assert (row["status"], row["error"]) == ("failed", "RuntimeError: loss is NaN at step 3")


def test_base_condition_evaluates_the_base_policy(config, tmp_path: Path, monkeypatch) -> None:
    seen = {}

    def fake_evaluate(target, metrics_out=None):
        seen["target"] = target
        out = tmp_path / "eval"
        write_jsonl(out / "generations.jsonl", [{"U": 0.0}, {"U": 1.0}, {"U": None}])
        return EvalResult(out, {"run_name": target.run_name, "step": None, "pass_at_1": 0.5, "hacking_gap": None}, None)

    monkeypatch.setattr("hackable_rl.study.condition.evaluate", fake_evaluate)
    record = study.run_condition(config, "base", tmp_path / "out")
    assert record["status"] == "ok" and record["error"] is None
    assert seen["target"].policy_path is None and seen["target"].run_name == "base-flip-r0.4-s2"
    assert seen["target"].config.method == "baseline"
    assert record["eval"]["disagreement"] == pytest.approx(0.5)
    assert json.loads((tmp_path / "out" / "condition.json").read_text())["eval"]["hacking_gap"] is None


def test_condition_cli_exits_zero_on_a_failed_condition(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr("hackable_rl.training.run.run_training", broken)
    out = tmp_path / "cell"
    result = CliRunner().invoke(app, [
        "condition", "--method", "robust", "--config", str(ROOT / "params.yaml"),
        "--study", str(ROOT / "pipelines" / "flawed_verifier" / "study.yaml"),
        "--set", f"storage.cache_dir={tmp_path}", "--set", "corruption.rate=0.1", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    written = json.loads((out / "condition.json").read_text())
    assert written["status"] == "failed" and written["condition"]["rate"] == 0.1
    bad = CliRunner().invoke(app, ["condition", "--method", "sft", "--config", str(ROOT / "params.yaml"), "--out", str(out)])
    assert bad.exit_code == 2


def test_method_overrides_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such study file"):
        cells.method_overrides(tmp_path / "missing.yaml", "robust")
    bad = tmp_path / "study.yaml"
    bad.write_text("method_overrides:\n  robust: verifier.aggregation=min\n")
    with pytest.raises(UserError, match="study.yaml: method_overrides.robust: got 'verifier.aggregation=min'"):
        cells.method_overrides(bad, "robust")


def test_bad_condition_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "condition.json"
    path.write_text("{\n  \"status\": ok\n}")
    with pytest.raises(UserError, match=r"condition.json:2: not valid JSON"):
        records.read_condition(path)
    path.write_text("{}")
    with pytest.raises(UserError, match="expected a condition.json"):
        records.read_condition(path)


def test_a_cell_the_method_refuses_is_recorded_by_the_condition_command(tmp_path: Path, monkeypatch) -> None:
    """corrected at J = 0 (fp0.5-fn0.5) has nothing to correct: the condition is a failed row, exit 0."""
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    folder = ROOT / "pipelines" / "corruption_sweep"
    monkeypatch.chdir(folder)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["condition", "--method", "corrected", "--study", "study.yaml", "--cell",
                                      "fp0.5-fn0.5", "--out", str(out), "--set", f"storage.cache_dir={tmp_path}"])
    assert result.exit_code == 0, result.output
    record = records.read_condition(out / "condition.json")
    assert record["status"] == "failed" and "rho0 + rho1 = 1" in record["error"]


def test_a_study_whose_estimate_exceeds_its_budget_is_refused_with_the_estimate_and_its_parts() -> None:
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    folder = ROOT / "pipelines" / "smollm2_learning"
    result = CliRunner().invoke(app, ["validate", "--config", str(folder / "params.yaml"), "--study",
                                      str(folder / "study.yaml"), "--set", "trainer.max_steps=2000"])
    assert result.exit_code == 2
    assert "budget_hours 10: these settings need about" in result.output
    assert all(part in result.output for part in ("warm starts", "trainings", "evaluations"))


def test_a_studys_measured_cost_adds_up_what_each_stage_recorded(tmp_path) -> None:
    """The report's "What the study cost": warm starts, base evaluations and trained conditions from the
    seconds each recorded, one lane each; an arm identical by construction ran nothing and counts nothing."""
    from hackable_rl.core.jsonl import write_json
    from hackable_rl.study.budget import measured_cost

    def condition(folder: str, method: str, seconds: float, status: str = "ok", train_seconds: float | None = None):
        train = {"train": {"seconds": train_seconds}} if train_seconds else {}
        return write_json(tmp_path / folder / "condition.json",
                          {"condition": {"method": method}, "status": status, "seconds": seconds, **train})

    files = [condition("base-s0", "base", 900), condition("baseline-s0", "baseline", 2700, train_seconds=1800),
             condition("baseline-s1", "baseline", 3600, status="failed"),
             condition("robust-s0", "robust", 0, status=records.IDENTICAL)]
    warm = [write_json(tmp_path / f"w{seed}.json", {"seconds": {"train": 800, "total": 1800}}) for seed in (0, 1)]

    cost = measured_cost(files, warm)

    assert (cost.warm_starts, cost.base_evaluations, cost.trained_conditions) == (2, 1, 2)  # a failed run cost time too
    assert (cost.warm_start_hours, cost.base_hours, cost.trained_hours) == (1.0, 0.25, 1.75)
    assert cost.lane_hours == 3.0 and cost.wall_hours == 1.5  # two lanes share the wall time
    assert cost.training_hours == 0.5  # of the trained conditions' hours, what their training recorded
    assert "3.0 lane-hours, about 1.5 h of wall time" in cost.describe()
