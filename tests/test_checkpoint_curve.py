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
from hackable_rl.evaluation.paired import read_prompt_results

REPO = Path(__file__).resolve().parents[1]
PILOTS = REPO / "pipelines" / "smollm2_learning" / "pilots.yaml"

PILOTS_TEXT = """
grid: [fast]
settings:
  fast: [trainer.learning_rate=1.0e-3]
shared: [evaluation.split=validation, evaluation.max_prompts=6, evaluation.n=2, "evaluation.k=[1, 2]",
         trainer.max_steps=4, "trainer.permanent_steps=[2]", "evaluation.checkpoint_steps=[2, 4]"]
rule: the cheapest setting that gains
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
