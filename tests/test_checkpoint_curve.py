"""A condition's learning curve at its checkpoints (`evaluation.checkpoint_steps`) and the pilots file
that runs it (`config.pilots`), on the tiny policy."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.loading import load_config
from hackable_rl.config.pilots import load_pilots, pilot_overrides
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.evaluation.prompt_results import read_prompt_results

REPO = Path(__file__).resolve().parents[1]
PILOTS = REPO / "pipelines" / "smollm2_learning" / "pilots.yaml"

PILOTS_TEXT = """
grid: [fast]
settings:
  fast: [trainer.learning_rate=1.0e-3]
shared: [evaluation.split=validation, evaluation.max_prompts=6, evaluation.n=2, "evaluation.k=[1, 2]",
         trainer.max_steps=4, "trainer.permanent_steps=[2]", "evaluation.checkpoint_steps=[2, 4]"]
rule: the cheapest setting that gains
target_gain: 0.10
fallback_gain: 0.06
"""


def test_a_pilot_evaluates_each_checkpoint_on_validation(project: Path) -> None:
    (project / "pilots.yaml").write_text(PILOTS_TEXT)
    result = CliRunner().invoke(app, ["condition", "--method", "baseline", "--pilots", "pilots.yaml",
                                      "--setting", "fast", "--set", "tracking.enabled=false", "--out", "pilot"])
    assert result.exit_code == 0, result.output
    record = json.loads((project / "pilot" / "condition.json").read_text())
    assert record["status"] == "ok", record.get("traceback")
    assert record["eval"]["split"] == "validation"
    curve = pd.read_csv(project / "pilot" / "checkpoints.csv")
    assert list(curve["step"]) == [2, 4]
    assert list(curve["n_prompts"]) == [6, 6]
    # the last row is the condition's own evaluation, the earlier one the step-2 checkpoint's
    assert curve["pass_at_1"].iloc[-1] == pytest.approx(record["eval"]["pass_at_1"])
    for step, row in zip(curve["step"], curve.itertuples(), strict=True):
        prompts = read_prompt_results(project / "pilot" / "checkpoints" / f"step-{step}" / "prompts.jsonl")
        assert len(prompts) == 6
        assert sum(p.correct for p in prompts) / sum(p.n for p in prompts) == pytest.approx(row.pass_at_1)


def test_the_pilots_summary_pairs_each_checkpoint_with_the_warm_start(project: Path) -> None:
    (project / "pilots.yaml").write_text(PILOTS_TEXT)
    runner = CliRunner()
    for args in (["--method", "base", "--out", "pilots/base-s0"],
                 ["--method", "baseline", "--setting", "fast", "--out", "pilots/fast-s0"]):
        result = runner.invoke(app, ["condition", *args, "--pilots", "pilots.yaml", "--set", "tracking.enabled=false"])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["pilots", "--pilots", "pilots.yaml", "--folder", "pilots", "--out", "summary"])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(project / "summary" / "summary.csv")
    assert list(summary["step"]) == [2, 4] and set(summary["setting"]) == {"fast"}
    base = read_prompt_results(project / "pilots" / "base-s0" / "prompts.jsonl")
    final = read_prompt_results(project / "pilots" / "fast-s0" / "checkpoints" / "step-4" / "prompts.jsonl")
    by_id = {row.prompt_id: row.correct / row.n for row in base}
    expected = sum(row.correct / row.n - by_id[row.prompt_id] for row in final) / len(final)
    assert summary["gain"].iloc[-1] == pytest.approx(expected, abs=1e-4)
    assert (project / "summary" / "curves.png").stat().st_size > 0
    assert "rule: " in result.output


def _point(setting: str, step: int, gain: float, greedy: float = 0.0, per_step: float = 10.0):
    from hackable_rl.report.pilots import CurvePoint

    return CurvePoint(setting, 0, step, 0.3 + gain, gain, 0.02, gain, 0.4, greedy, 0.03, None, None, None, per_step,
                      step * per_step, 100)


def test_the_rule_takes_the_cheapest_qualifying_checkpoint_then_falls_back() -> None:
    from hackable_rl.report.pilots import choose

    points = [_point("a", 30, 0.05), _point("a", 60, 0.11), _point("b", 30, 0.12, greedy=-0.05),
              _point("b", 60, 0.15), _point("c", 30, 0.10, per_step=30.0)]
    choice = choose(points, 0.10, 0.06)
    # b@30 fails the guard; a@60 and b@60 cost the same, and b gains more
    assert (choice.point.setting, choice.point.step, choice.rung) == ("b", 60, "target")
    fallback = choose([_point("a", 30, 0.07), _point("a", 60, 0.08), _point("b", 30, 0.09, greedy=-0.1)], 0.10, 0.06)
    assert (fallback.point.setting, fallback.point.step, fallback.rung) == ("a", 60, "fallback")
    assert choose([_point("a", 30, 0.05)], 0.10, 0.06).point is None


def test_a_setting_outside_the_grid_is_refused_naming_it(project: Path) -> None:
    (project / "pilots.yaml").write_text(PILOTS_TEXT)
    result = CliRunner().invoke(app, ["condition", "--method", "baseline", "--pilots", "pilots.yaml",
                                      "--setting", "slow", "--out", "pilot"])
    assert result.exit_code == 2
    assert "--setting 'slow' is not in the declared grid (fast)" in result.output
    assert not (project / "pilot").exists()


def test_checkpoint_steps_must_be_saved(tiny_params_writer, tmp_path: Path) -> None:
    path = tiny_params_writer(tmp_path, {"trainer.max_steps": 4, "evaluation.checkpoint_steps": [3, 4]})
    with pytest.raises(ConfigError, match=r"evaluation.checkpoint_steps: \[3\] are not saved for good"):
        load_config(path)


def test_the_learning_studys_pilots_validate_and_tune_on_validation(tmp_path: Path) -> None:
    pilots = load_pilots(PILOTS)
    assert pilots.grid and pilots.rule.strip()
    for setting in [None, *pilots.grid]:
        config = load_config(PILOTS.parent / "params.yaml", pilot_overrides(PILOTS, setting))
        assert config.evaluation.split == "validation"
        assert set(config.evaluation.checkpoint_steps) <= {*config.trainer.permanent_steps, config.trainer.max_steps}
    bad = tmp_path / "pilots.yaml"
    bad.write_text(PILOTS_TEXT.replace("evaluation.split=validation", "evaluation.split=test"))
    with pytest.raises(UserError, match="pilots tune on validation, never on 'test'"):
        load_pilots(bad)


def test_a_resume_from_another_warm_start_is_refused_naming_it(project: Path) -> None:
    from hackable_rl.models.sources import policy_dir, warm_start_fingerprint
    from hackable_rl.training.run_dir import check_same_warm_start

    config = load_config("params.yaml", ["tracking.enabled=false"])
    began = warm_start_fingerprint(config)
    assert began is not None and began["folder"] == policy_dir(config).name
    check_same_warm_start(project, {"warm_start": began}, config)  # the same bytes: resumes
    weights = sorted(policy_dir(config).glob("*.safetensors"))[0]
    weights.write_bytes(weights.read_bytes() + b"\0")  # a warm start made again, otherwise
    with pytest.raises(UserError, match=rf"warm start: was {began['folder']} sha256 {began['sha256'][:12]}, now "):
        check_same_warm_start(project, {"warm_start": began}, config)
    check_same_warm_start(project, {}, config)  # a run from before the record: nothing to compare


def test_the_confirmation_judges_the_chosen_steps_on_each_confirm_seed_by_the_threshold_chosen_under() -> None:
    from dataclasses import replace

    from hackable_rl.report.pilots import Choice, confirmations

    choice = Choice(_point("a", 90, 0.11), 0.10, "target")
    on_seed_1 = [replace(_point("a", 60, 0.12), seed=1), replace(_point("a", 90, 0.058), seed=1)]
    on_seed_2 = [replace(_point("a", 90, 0.13, greedy=-0.05), seed=2)]  # the gain, but below the greedy guard
    on_seed_3 = [replace(_point("a", 90, 0.12), seed=3)]
    verdicts = confirmations(choice, [*on_seed_1, *on_seed_2, *on_seed_3], [1, 2, 3, 4])
    assert [v.confirmed for v in verdicts] == [False, False, True, None]
    assert verdicts[0].describe().startswith("confirmation on s1: NOT confirmed: a at 90 steps gains +0.058")
    assert verdicts[3].describe() == "confirmation on s4: waiting for a-s4 (step 90)"
    assert confirmations(Choice(None, None), on_seed_1, [1]) == []
