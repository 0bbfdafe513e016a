"""`train --resume auto` continues a run only under the config it started with: a difference exits 2
naming each key with both values; `--allow-config-change` continues and records the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.storage import Storage
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.training.resume_guard import check_resume_config, compare_configs
from hackable_rl.training.run import run_training
from hackable_rl.training.run_dir import create_run_dir, open_run_dir


def _flat(params: Path, *overrides: str) -> dict:
    return flatten_config(load_resolved(params, list(overrides)))


@pytest.fixture
def params(tmp_path, monkeypatch) -> Path:
    """Defaults, tracking off, in a fresh current directory: the guard runs before any model loads."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"storage": {"cache_dir": "cache"}, "tracking": {"enabled": False}}))
    return path


def test_a_changed_training_key_is_refused_and_bookkeeping_keys_are_not(params):
    changes = compare_configs(
        _flat(params),
        _flat(params, "corruption.rate=0.9", "trainer.save_steps=5", "trainer.permanent_steps=[10]",
              "tracking.experiment_name=other", "evaluation.n=8", "evaluation.k=[1]"),
    )
    assert [(c.key, c.was, c.now) for c in changes.refused] == [("corruption.rate", 0.2, 0.9)]
    assert {c.key for c in changes.allowed} == {
        "trainer.save_steps", "trainer.permanent_steps", "tracking.experiment_name", "evaluation.n", "evaluation.k",
    }


def test_max_steps_may_change_only_when_the_learning_rate_does_not_depend_on_it(params):
    constant = compare_configs(_flat(params), _flat(params, "trainer.max_steps=500"))
    assert not constant.refused and [c.key for c in constant.allowed] == ["trainer.max_steps"]

    cosine = compare_configs(_flat(params, "trainer.scheduler=cosine"), _flat(params, "trainer.scheduler=cosine",
                                                                              "trainer.max_steps=500"))
    assert [c.key for c in cosine.refused] == ["trainer.max_steps"]


def test_resume_with_a_changed_config_exits_2_naming_each_key_and_both_values(params):
    config = load_resolved(params)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    create_run_dir(run_dir, config)  # run.json + config.yaml, as a run killed early leaves them

    result = CliRunner().invoke(
        app, ["train", "--resume", "auto", "--set", "corruption.rate=0.9", "--set", "seed=3",
              "--set", "tracking.run_name=baseline-flip-r0.2-s0"],
    )

    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert f"error: {run_dir / 'config.yaml'}: corruption.rate: was 0.2, now 0.9" in errors
    assert f"error: {run_dir / 'config.yaml'}: seed: was 0, now 3" in errors
    assert "--allow-config-change" in errors[-1] and len(errors) == 3
    assert "Traceback" not in result.output
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["corruption"]["rate"] == 0.2


def test_the_guard_passes_an_unchanged_config_and_a_missing_file_needs_the_flag(params):
    config = load_resolved(params)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    create_run_dir(run_dir, config)
    assert not check_resume_config(run_dir, config, allow_change=False).any

    (run_dir / "config.yaml").unlink()
    with pytest.raises(UserError, match="config.yaml: missing"):
        check_resume_config(run_dir, config, allow_change=False)
    assert check_resume_config(run_dir, config, allow_change=True).refused


def test_resume_of_a_finished_run_is_refused_rather_than_training_past_max_steps(params):
    config = load_resolved(params)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    create_run_dir(run_dir, config)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(info | {"status": "finished", "final_step": config.trainer.max_steps}))
    with pytest.raises(UserError, match=f"finished at step {config.trainer.max_steps} of {config.trainer.max_steps}; "
                                        "--resume auto has nothing to continue"):
        open_run_dir(run_dir, config, "auto", overwrite=False, allow_change=False)


def test_allow_config_change_resumes_and_records_the_change_and_every_checkpoint(project):
    """Two processes: steps 1-2 (checkpoint 2), then a resume to step 3 at another rate (the
    run name is explicit: a derived one holds the rate, so a new rate would name a new run)."""
    # A constant learning rate without warm-up: only then may max_steps change on resume.
    constant = ["trainer.scheduler=constant", "trainer.warmup_ratio=0", "tracking.run_name=mine"]
    first = run_training(load_resolved("params.yaml", ["trainer.max_steps=2", *constant]))
    artifacts_first = json.loads((first.run_dir / "run.json").read_text())["checkpoint_artifacts"]
    assert artifacts_first == {"2": "checkpoints/permanent/step-2"}

    changed = load_resolved("params.yaml", ["trainer.max_steps=3", "corruption.rate=0.5", *constant])
    with pytest.raises(UserError, match="corruption.rate: was 0.2, now 0.5"):
        run_training(changed, resume="auto")
    result = run_training(changed, resume="auto", allow_config_change=True)

    assert result.final_step == 3
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["config_changes"] == [
        {"resumed_from_step": 2, "forced": {"corruption.rate": {"was": 0.2, "now": 0.5}},
         "allowed": {"trainer.max_steps": {"was": 2, "now": 3}}}
    ]
    # item 6: the checkpoints both processes sent MLflow, not only the last one's
    assert info["checkpoint_artifacts"] == {"2": "checkpoints/permanent/step-2", "3": "checkpoints/permanent/step-3"}
    assert yaml.safe_load((result.run_dir / "config.yaml").read_text())["corruption"]["rate"] == 0.5
    before = yaml.safe_load((result.run_dir / "config.before-step-2.yaml").read_text())
    assert before["corruption"]["rate"] == 0.2

    client = MlflowClient(tracking_uri(changed.storage.cache_dir))
    tag = client.get_run(result.run_id).data.tags["config_change.step-2"]
    assert "corruption.rate: was 0.2, now 0.5 (forced)" in tag and "trainer.max_steps: was 2, now 3" in tag
