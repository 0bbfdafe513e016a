"""The typed config: every shipped params file validates; mistakes give one line each, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import ConfigError
from hackable_rl.core.storage import Storage, mlflow_store_dir, project_root
from hackable_rl.extensions import load_resolved

REPO = Path(__file__).resolve().parents[1]
PARAMS_FILES = sorted(p for p in REPO.rglob("params*.yaml") if ".venv" not in p.parts and "cache" not in p.parts)


def test_the_repository_ships_params_files():
    names = {str(p.relative_to(REPO)) for p in PARAMS_FILES}
    assert "params.yaml" in names
    assert {"pipelines/corruption_sweep/params.yaml", "pipelines/flawed_verifier/params.yaml"} <= names


@pytest.mark.parametrize("path", PARAMS_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_params_file_validates(path):
    config = load_resolved(path)
    assert isinstance(config, ExperimentConfig)


def _fields(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _fields(annotation, f"{prefix}{name}.")
        yield f"{prefix}{name}", field


def test_every_field_is_documented():
    undocumented = [name for name, field in _fields(ExperimentConfig) if not field.description]
    assert undocumented == []


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("corruption.rate=1.4", "corruption.rate: 1.4 is not in [0, 1]"),
        ("trainer.lerning_rate=1e-4", "trainer.lerning_rate: unknown key (did you mean learning_rate?)"),
        ("trainer.max_steps=many", "trainer.max_steps: got 'many' (str); expected a valid integer"),
        ("corruption.channel=gaussian", "corruption.channel: unknown corruption channel 'gaussian'; valid: asymmetric"),
        ("corruption.channel=flipp", "corruption.channel: unknown corruption channel 'flipp' (did you mean 'flip'?)"),
        ("method=robst", "method: unknown method 'robst' (did you mean 'robust'?)"),
        ("verifier.aggregation=majorty", "verifier.aggregation: unknown aggregation 'majorty' (did you mean 'majority'?)"),
        ("corruption.kwargs.fp_scale=2", "corruption.kwargs.fp_scale: unknown setting (this one takes none)"),
        ("evaluation.metrics=[strict_shar]", "evaluation.metrics[0]: unknown report metric 'strict_shar' (did you mean"),
        ("trainer.optimizer=lion", "trainer.optimizer: 'lion' is not a known optimizer"),
        ("evaluation.k=[1,16]", "evaluation.k: [16] exceed evaluation.n = 8"),
    ],
)
def test_a_mistake_is_one_line_naming_the_path(override, line):
    with pytest.raises(ConfigError) as caught:
        load_resolved(REPO / "params.yaml", [override])
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(line)


def test_batch_not_divisible_by_group_size_explains_the_fix():
    with pytest.raises(ConfigError) as caught:
        load_resolved(REPO / "params.yaml", ["trainer.per_device_train_batch_size=30", "trainer.num_generations=4"])
    (problem,) = caught.value.problems
    assert problem.startswith("trainer.per_device_train_batch_size: effective batch 30")
    assert "not divisible by num_generations 4" in problem and "multiple of num_generations" in problem


def test_numeric_strings_and_aliases_are_normalised():
    config = load_resolved(
        REPO / "params.yaml", ['trainer.learning_rate="1e-4"', "trainer.optimizer=AdamW", "trainer.scheduler=Cosine"]
    )
    assert config.trainer.learning_rate == 1e-4
    assert config.trainer.optimizer == "adamw_torch"
    assert config.trainer.scheduler == "cosine"


def test_config_is_frozen():
    config = load_resolved(REPO / "params.yaml")
    with pytest.raises(ValueError):
        config.corruption.rate = 0.9  # type: ignore[misc]


def test_cli_rejects_a_broken_copy_with_one_line_per_problem_and_exit_2(tmp_path):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["trainer"]["lerning_rate"] = raw["trainer"].pop("learning_rate")  # misspelt key
    raw["corruption"]["rate"] = 1.4  # out of range
    raw["trainer"]["max_steps"] = "fifty"  # wrong type
    broken = tmp_path / "params.yaml"
    broken.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["validate", "--config", str(broken)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert sorted(lines) == sorted(
        [
            "error: trainer.lerning_rate: unknown key (did you mean learning_rate?)",
            "error: corruption.rate: 1.4 is not in [0, 1]",
            "error: trainer.max_steps: got 'fifty' (str); expected a valid integer, unable to parse string as an integer",
        ]
    )
    assert "Traceback" not in result.output


def test_cli_validate_accepts_params_and_prints_the_resolved_config():
    result = CliRunner().invoke(app, ["validate", "--config", str(REPO / "params.yaml"), "--set", "seed=3"])
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["seed"] == 3


def test_missing_and_malformed_files_are_user_errors(tmp_path):
    result = CliRunner().invoke(app, ["validate", "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "no such config file" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1\n")
    result = CliRunner().invoke(app, ["validate", "--config", str(bad)])
    assert result.exit_code == 2 and "not valid YAML" in result.output


def test_cli_help_lists_the_commands():
    result = CliRunner().invoke(app, ["--help"])
    for command in ("validate", "prepare", "warmstart", "train", "eval", "judge", "promote", "sync", "ui", "report"):
        assert command in result.output


def test_storage_layout_and_dvc_temp_workspaces(tmp_path):
    storage = Storage.from_config("cache", cwd=tmp_path)
    assert storage.run_dir("r") == tmp_path / "cache/artifacts/runs/r"
    assert storage.permanent_checkpoint("r", 5) == tmp_path / "cache/artifacts/runs/r/checkpoints/permanent/step-5"
    assert storage.resolve("models/x") == tmp_path / "cache/models/x"
    temp = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "tmpab12"
    temp.mkdir(parents=True)
    assert project_root(temp) == tmp_path / "repo"
    assert mlflow_store_dir("/abs/cache") == Path("/abs/cache/mlflow")
    clean = Storage.from_config("cache", cwd=tmp_path, runs_dir="artifacts/clean-runs")
    assert clean.run_dir("r") == tmp_path / "cache/artifacts/clean-runs/r"
    assert Storage.from_config("cache", cwd=tmp_path, runs_dir="/elsewhere").run_dir("r") == Path("/elsewhere/r")


def _stage_param_keys(stage: dict) -> list[tuple[str, str]]:
    keys = []
    for item in stage.get("params") or []:
        if isinstance(item, str):
            keys.append(("params.yaml", item))
        else:
            keys += [(file, key) for file, listed in item.items() for key in listed]
    return keys


DVC_FILES = [REPO / "dvc.yaml", *sorted((REPO / "pipelines").glob("*/dvc.yaml"))]


@pytest.mark.parametrize("dvc_file", DVC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_per_key_param_of_a_stage_exists(dvc_file):
    """DVC refuses to run a stage whose listed param is missing from the params file."""
    missing = []
    for name, stage in yaml.safe_load(dvc_file.read_text())["stages"].items():
        for file, key in _stage_param_keys(stage):
            node = yaml.safe_load((dvc_file.parent / file).read_text())
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    missing.append(f"{name}: {file}:{key}")
                    break
                node = node[part]
    assert missing == []


def test_a_database_store_whose_driver_is_missing_is_one_line_naming_it() -> None:
    """SQLAlchemy picks the driver: a bare postgresql:// means psycopg (3), not the `server` extra's psycopg2,
    and mysql:// means MySQLdb; neither is in the dev install, so both are refused before any work."""
    import importlib.util

    from hackable_rl.config.extras import check_store_extras
    from hackable_rl.core.errors import UserError

    assert importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("MySQLdb") is None
    with pytest.raises(UserError, match=r"postgresql://\.\.\.: SQLAlchemy's driver for it, psycopg, is not installed: "
                                        r"install it, or name a driver that is installed in the URI "
                                        r"\(postgresql\+psycopg2://\.\.\., the `server` extra's driver\)"):
        check_store_extras("postgresql://alice:secret@db:5432/mlflow")
    with pytest.raises(UserError, match="mysql://...: SQLAlchemy's driver for it, MySQLdb, is not installed"):
        check_store_extras("mysql://alice:secret@db/mlflow")
    check_store_extras("postgresql+psycopg2://alice@db/mlflow")  # the server extra's driver: installed
    check_store_extras("sqlite:///cache/mlflow.db")  # no extra needed


@pytest.mark.parametrize(("setting", "module", "extra"), [
    ("generation.use_vllm=true", "vllm", "gpu"),
    ("model.attn_implementation=flash_attention_2", "flash_attn", "gpu"),
    ("model.use_liger='on'", "liger_kernel", "gpu"),  # quoted: YAML 1.1 reads a bare on as true
])
def test_each_model_extra_missing_is_one_line_naming_it(monkeypatch, setting, module, extra):
    import importlib.util

    from hackable_rl.config.extras import check_extras
    from hackable_rl.config.loading import apply_overrides, validate_config
    from hackable_rl.core.errors import UserError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    config = validate_config(apply_overrides({}, [setting]))
    with pytest.raises(UserError, match=rf"needs {module}, which is not installed: pip install 'hackable-rl\[{extra}\]'"):
        check_extras(config)


def test_lanes_without_ray_names_its_extra(monkeypatch):
    import sys

    from hackable_rl.core.errors import UserError
    from hackable_rl.scheduling.ray_cells import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # the import fails as if ray were not installed
    with pytest.raises(UserError, match=r"pip install 'hackable-rl\[ray\]'"):
        import_ray()
