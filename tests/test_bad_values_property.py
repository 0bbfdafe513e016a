"""Bad values by class, not by case (Hypothesis): every leaf field of the config schema given a value of
the wrong type, a huge or negative number, an empty or overlong string, a list or a mapping, through
`--set` on the command line; and every option of the commands that fail fast given junk. Each either
runs (the value was fine) or is refused with exit 2 and error lines naming the field or option: never a
traceback, never another exit code, never a file changed, within a time bound.

Seeded (`derandomize`) so CI sees the same examples every run; `HYPOTHESIS_PROFILE=long` tries many
more locally (`pytest tests/test_bad_values_property.py` with it set).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.experiment import ExperimentConfig

REPO = Path(__file__).resolve().parents[1]
settings.register_profile("ci", max_examples=80, derandomize=True, deadline=5000,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("long", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "2000")), deadline=10000,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def _leaf_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted path to a field that is not itself a config section."""
    paths = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths += _leaf_paths(annotation, f"{prefix}{name}.")
        else:
            paths.append(f"{prefix}{name}")
    return paths


FIELDS = _leaf_paths(ExperimentConfig)

BAD_VALUES = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "x" * 300, "null", "[]", "{}", "true", "-1", "1e400", "0x10", "010", "~"]),
    st.text(max_size=20),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)


def _as_set_value(value: Any) -> str:
    """What a user would type after `key=` for this value (YAML flow style for lists and mappings)."""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def _refused_or_fine(result, names: list[str]) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert errors, result.output
        assert any(name in line for line in errors for name in names), (names, errors)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


@pytest.mark.usefixtures("fresh_logging")
@settings(settings.get_profile(PROFILE))
@given(field=st.sampled_from(FIELDS), value=BAD_VALUES)
def test_any_value_of_any_field_runs_or_is_refused_naming_the_field(workspace: Path, field: str, value: Any) -> None:
    before = _snapshot(workspace)
    result = CliRunner().invoke(app, ["validate", "--set", f"{field}={_as_set_value(value)}"])
    # A cross-field check names the field it weighs this one against, so the section is enough.
    _refused_or_fine(result, [field, field.rsplit(".", 1)[-1], field.split(".", 1)[0], "params.yaml"])
    assert _snapshot(workspace) == before


JUNK = st.one_of(st.sampled_from(["", "-1", "99999999999999999999999", "nan", "fifo", "/dev/null", ".", "x" * 300]),
                 st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12))
FAST_COMMANDS = {  # each with arguments that run as they are: the junk is the only problem
    "validate": (["validate"], ["--config", "--set"]),
    "judge": (["judge", "--input", "in.jsonl", "--output", "out.jsonl"], ["--input", "--output", "--extract"]),
    "seeds": (["seeds", "--seeds", "0", "--", "validate"], ["--seeds", "--parallel"]),
}


@pytest.mark.usefixtures("fresh_logging")
@settings(settings.get_profile(PROFILE))
@given(command=st.sampled_from(sorted(FAST_COMMANDS)), data=st.data())
def test_junk_in_an_option_is_refused_naming_it_or_runs(workspace: Path, command: str, data) -> None:
    base, options = FAST_COMMANDS[command]
    option, junk = data.draw(st.sampled_from(options)), data.draw(JUNK)
    if not (workspace / "fifo").exists():
        os.mkfifo(workspace / "fifo")
    (workspace / "in.jsonl").write_text('{"completion": "<think>1+1=2</think> \\\\boxed{2}", "reference": "2"}\n')
    before = _snapshot(workspace)
    result = CliRunner().invoke(app, [base[0], option, junk, *base[1:]])
    names = [option, option.lstrip("-"), "KEY=VALUE", "key=value", "dotted key"] + ([junk.strip()[:30]] if junk.strip() else [])
    _refused_or_fine(result, names)
    changed = {name for name, content in _snapshot(workspace).items()
               if name in before and before[name] != content and not name.endswith("out.jsonl")}
    assert not changed, changed
