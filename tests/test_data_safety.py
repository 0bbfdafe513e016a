"""No command deletes a folder hackable-rl did not create: names are one folder inside their root,
`train` refuses foreign folders (with or without --overwrite), and the eval policy cache replaces
only its own copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.storage import Storage
from hackable_rl.extensions import load_resolved
from hackable_rl.training.run_dir import make_room, open_run_dir

RUN = "baseline-flip-r0.2-s0"


@pytest.fixture
def params(tmp_path, monkeypatch) -> Path:
    """A params.yaml of defaults (tracking off) in a fresh folder that is the current directory:
    every refusal here happens before data or a model is needed."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    path = project / "params.yaml"
    path.write_text(yaml.safe_dump({"storage": {"cache_dir": "cache"}, "tracking": {"enabled": False}}))
    return path


def _train(*args: str):
    return CliRunner().invoke(app, ["train", *args])


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("tracking.run_name=../../../victim", "tracking.run_name"),
        ("tracking.run_name=runs/mine", "tracking.run_name"),
        ("tracking.run_name=..", "tracking.run_name"),
        ("tracking.run_name=''", "tracking.run_name"),
        ("data.name=../../elsewhere", "data.name"),
        ("data.name=a\\b", "data.name"),
    ],
)
def test_a_name_that_is_not_one_folder_is_refused_naming_its_field(params, override, field):
    with pytest.raises(ConfigError) as error:
        load_resolved(params, [override])
    assert len(error.value.problems) == 1
    assert error.value.problems[0].startswith(f"{field}: ")


def test_train_with_a_dotdot_run_name_exits_2_and_the_victim_survives(params, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f").write_text("x")

    result = _train("--set", "tracking.run_name=../../../../victim", "--overwrite")

    assert result.exit_code == 2
    assert "tracking.run_name" in result.output and "Traceback" not in result.output
    assert (victim / "f").read_text() == "x"


def test_train_with_a_slash_in_the_run_name_exits_2(params):
    result = _train("--set", "tracking.run_name=nested/run")

    assert result.exit_code == 2
    assert "tracking.run_name: 'nested/run' contains a path separator" in result.output
    assert not (params.parent / "cache" / "artifacts" / "runs" / "nested").exists()


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_foreign_folder_with_the_run_name_is_refused_and_kept(params, overwrite):
    notes = params.parent / "cache" / "artifacts" / "runs" / RUN
    notes.mkdir(parents=True)
    (notes / "notes.md").write_text("my notes")

    result = _train(*overwrite)

    assert result.exit_code == 2
    assert f"{notes}: exists but holds no run.json written by hackable-rl" in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1
    assert (notes / "notes.md").read_text() == "my notes"


def test_a_run_json_not_written_by_hackable_rl_is_not_a_licence_to_delete(tmp_path):
    folder = tmp_path / "runs" / RUN
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"owner": "someone else"}))
    (folder / "data.csv").write_text("1,2")

    with pytest.raises(UserError, match="not written by hackable-rl"):
        make_room(folder, overwrite=True)
    assert (folder / "data.csv").exists()


def test_overwrite_deletes_a_folder_hackable_rl_created(params):
    config = load_resolved(params)
    run_dir = Storage.of(config.storage).run_dir(config.run_name)
    first = open_run_dir(run_dir, config, "never", overwrite=False, allow_change=False)
    assert first.info["created_by"] == "hackable-rl"
    assert json.loads((run_dir / "run.json").read_text())["created_by"] == "hackable-rl"
    assert (run_dir / "config.yaml").is_file()  # written with the folder, before any model loads
    (run_dir / "generations").mkdir()

    with pytest.raises(UserError, match="a run with this name exists"):
        open_run_dir(run_dir, config, "never", overwrite=False, allow_change=False)
    assert (run_dir / "generations").exists()

    open_run_dir(run_dir, config, "never", overwrite=True, allow_change=False)
    assert not (run_dir / "generations").exists() and (run_dir / "run.json").is_file()


def test_a_run_folder_that_links_outside_the_runs_root_is_refused(tmp_path):
    storage = Storage.from_config(tmp_path / "cache")
    outside = tmp_path / "outside"
    outside.mkdir()
    storage.runs.mkdir(parents=True)
    (storage.runs / "linked").symlink_to(outside, target_is_directory=True)

    with pytest.raises(UserError, match="outside"):
        storage.run_dir("linked")


def test_eval_refuses_a_run_name_from_mlflow_that_leaves_the_eval_folder(params, monkeypatch):
    from mlflow import MlflowClient

    from hackable_rl.evaluation.stage.targets import target_from_run
    from hackable_rl.tracking.store import tracking_uri

    config = load_resolved(params, ["tracking.enabled=true", f"storage.cache_dir={params.parent / 'cache'}"])
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    run_id = client.create_run(client.create_experiment("safety"), run_name="../../../victim").info.run_id

    with pytest.raises(UserError, match=r"--run-id .*: MLflow run name: '\.\./\.\./\.\./victim' contains"):
        target_from_run(config, run_id, None)


def test_the_eval_policy_cache_replaces_only_its_own_copies(tmp_path):
    from hackable_rl.evaluation.stage.targets import _copy_tree

    source = tmp_path / "download" / "step-2"
    source.mkdir(parents=True)
    (source / "checkpoint.json").write_text("{}")
    cached = tmp_path / "eval" / "run" / "policy" / "step-2"
    cached.mkdir(parents=True)
    (cached / "mine.txt").write_text("not a checkpoint")

    with pytest.raises(UserError, match="no checkpoint.json"):
        _copy_tree(source, cached)
    assert (cached / "mine.txt").exists()

    (cached / "mine.txt").unlink()
    (cached / "checkpoint.json").write_text('{"old": true}')
    _copy_tree(source, cached)
    assert (cached / "checkpoint.json").read_text() == "{}"
