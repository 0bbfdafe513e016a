"""Bad values by class, not by case (Hypothesis), one property per config field and per command option:

- every leaf field of each config section given a value of the wrong type, a huge or negative number,
  an empty or overlong string, a list or a mapping, through `--set`;
- every option and argument of each command given junk (empty, negative, huge, NaN, a FIFO, a device,
  the current folder, an overlong or random string), the command's other required values valid.

Each either passes the checks (the value was fine: the command then reaches its work, which a
sentinel stands in for here, so no model loads) or is refused with exit 2 and an error line naming
the field or option: never a traceback, never another exit code, nothing changed in the workspace,
each example within the deadline.

Seeded (`derandomize`) so CI sees the same examples every run; locally `HYPOTHESIS_PROFILE=long`
(optionally `HYPOTHESIS_EXAMPLES=N`, default 500 per property) searches much further.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.experiment import ExperimentConfig

REPO = Path(__file__).resolve().parents[1]
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
settings.register_profile("ci", max_examples=4, derandomize=True, deadline=10000, suppress_health_check=_QUIET)
settings.register_profile("long", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "200")), deadline=20000,
                          suppress_health_check=_QUIET)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class _ReachedWork(Exception):
    """Raised where a command would start its real work: its inputs passed every check."""


WORK = [  # (module, attribute): where each command hands over to its library function
    ("hackable_rl.data", "prepare_dataset"), ("hackable_rl.training.run", "run_training"),
    ("hackable_rl.warmstart", "run_warmstart"), ("hackable_rl.evaluation.stage.evaluate", "sample_and_score"),
    ("hackable_rl.study.condition", "run_condition"), ("hackable_rl.study.arms", "study_payoff"),
    ("hackable_rl.scheduling.lanes", "run_lanes"), ("hackable_rl.tracking.server", "serve_ui"),
    ("hackable_rl.tracking.sync", "sync_run"), ("hackable_rl.tracking.models_registry", "promote"),
    ("hackable_rl.report.build", "build_report"), ("hackable_rl.scheduling.seeds", "run_side_by_side"),
    ("hackable_rl.report.pilots", "write_pilot_summary"),
]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import importlib

    def reached(*_: Any, **__: Any) -> None:
        raise _ReachedWork

    for module, name in WORK:
        monkeypatch.setattr(importlib.import_module(module), name, reached)
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "pilots.yaml").write_text("grid: [a]\nsettings: {a: []}\nshared: [evaluation.split=validation]\n"
                                          "rule: the cheapest\ntarget_gain: 0.1\nfallback_gain: 0.06\n")
    (tmp_path / "in.jsonl").write_text('{"completion": "<think>1+1=2</think> \\\\boxed{2}", "reference": "2"}\n')
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def _refused_or_fine(result, names: list[str], args: list[str] | None = None) -> None:
    if isinstance(result.exception, _ReachedWork):
        return  # the value passed every check before the work
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert errors, result.output
        assert any(name and name.lower() in line.lower() for line in errors for name in names), (args, names, errors)


# --------------------------------------------------------------------------- every config field


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
    st.sampled_from(["", " ", "x" * 300, "null", "[]", "{}", "true", "-1", "1e400", "0x10", "010", "~", "1:30"]),
    st.text(max_size=20),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)


def _as_set_value(value: Any) -> str:
    """What a user would type after `key=` for this value (YAML flow style for lists and mappings)."""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


@pytest.mark.usefixtures("fresh_logging")
@pytest.mark.parametrize("field", FIELDS)
def test_any_value_of_any_field_runs_or_is_refused_naming_it(workspace: Path, field: str) -> None:
    @PROFILE
    @given(value=BAD_VALUES)
    def check(value: Any) -> None:
        before = _snapshot(workspace)
        result = CliRunner().invoke(app, ["validate", "--set", f"{field}={_as_set_value(value)}"])
        # A cross-field check names the field it weighs this one against: the section is enough.
        _refused_or_fine(result, [field, field.rsplit(".", 1)[-1], field.split(".", 1)[0], "params.yaml"])
        assert _snapshot(workspace) == before  # nothing changed, nothing new

    check()


# --------------------------------------------------------------------------- every command option


JUNK = st.one_of(
    st.sampled_from(["", "-1", "0", "99999999999999999999999", "nan", "fifo", "/dev/null", ".", "x" * 300, "in.jsonl"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12),
)
BASE_ARGS = {  # the required values each command needs, valid, so the junk is the one problem
    "judge": ["--input", "in.jsonl", "--output", "out.jsonl"], "sync": ["runs/x"], "promote": ["--run-id", "0123abcd"],
    "seeds": ["--seeds", "0"], "lanes": ["x"], "compare": ["--policy", "a=x", "--pair", "a:a"],
    "condition": ["--method", "baseline", "--out", "results/c"], "alarm-bench": ["results"], "eval": ["--base"],
    "report": ["--single"], "pilots": ["--pilots", "pilots.yaml"],
}
TAILS = {"seeds": ["--", "validate"]}
COMMANDS = typer.main.get_command(app).commands


def _shown(text: str) -> str:
    """`text` as an error line shows it: unprintable characters escaped (`cli.errors`)."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _with_junk(name: str, param: Any, junk: str) -> list[str]:
    """The command's valid base arguments with `junk` as the value of `param` (replacing a base value)."""
    args = list(BASE_ARGS.get(name, []))
    if getattr(param, "param_type_name", "") == "argument":  # sync, lanes, alarm-bench: the one positional
        return [name, junk, *TAILS.get(name, [])]
    flag = param.opts[0]
    if getattr(param, "is_flag", False):
        return [name, *args, flag, *TAILS.get(name, [])]
    if flag in args:
        args[args.index(flag) + 1] = junk
        return [name, *args, *TAILS.get(name, [])]
    return [name, *args, flag, junk, *TAILS.get(name, [])]


OPTIONS = [(name, param) for name in sorted(COMMANDS) for param in COMMANDS[name].params if param.name != "help"]


@pytest.mark.usefixtures("fresh_logging")
@pytest.mark.parametrize(("command", "param"), OPTIONS, ids=[f"{name}-{param.name}" for name, param in OPTIONS])
def test_junk_in_any_option_is_refused_naming_it_or_passes(workspace: Path, command: str, param: Any) -> None:
    @PROFILE
    @given(junk=JUNK)
    def check(junk: str) -> None:
        before = _snapshot(workspace)
        args = _with_junk(command, param, junk)
        result = CliRunner().invoke(app, args)
        names = [*getattr(param, "opts", []), param.name, param.name.replace("_", "-"), "KEY=VALUE", "dotted key",
                 junk.strip()[:30], _shown(junk.strip())[:30], *(["No such option"] if junk.startswith("-") else []),
                 "params.yaml", "results", "runs/x", "0123abcd", "a=x", "a:a", "MLflow", "mlflow"]
        _refused_or_fine(result, names, args)
        after = _snapshot(workspace)
        changed = {name for name, content in after.items() if name in before and before[name] != content}
        assert not changed, changed
        if result.exit_code == 2:  # refused: nothing left behind either (no partial file, lock or run folder)
            assert set(after) == set(before), sorted(set(after) - set(before))

    check()
