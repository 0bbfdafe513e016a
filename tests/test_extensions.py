"""Every extension point takes a plugin from outside src/: a data provider, a checker, a corruption
channel (with its own settings), an aggregation, a method (with its own config check), a reward
(declaring what it needs) and a report metric from tests/plugins/ drive a prepare, a two-step
training and an evaluation, and `validate` checks names against the registries with the nearest name."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.core.registry import AGGREGATIONS, CHANNELS, CHECKERS, METHODS, REPORT_METRICS
from hackable_rl.extensions import load_resolved

PLUGINS = Path(__file__).parent / "plugins"
PLUGIN_SETTINGS = [
    "data.provider=extension_plugin:arith_reversed",
    "verifier.members=[{name: m0, checker: 'extension_plugin:last_number'}, {name: m1, corrupted: false}]",
    "verifier.aggregation=extension_plugin:first_member",
    "objective.rewards=[format_tag_reward, correctness_reward, 'extension_plugin:closed_think_reward']",
    "corruption.channel=extension_plugin:stubborn",
    "corruption.rate=0.5",
    "corruption.kwargs.value=0.25",
    "method=extension_plugin:half_penalty",
    "evaluation.metrics=[strict_share, 'extension_plugin:boxed_share']",
    "trainer.max_steps=2",
    "tracking.enabled=false",
    "tracking.run_name=plugins",
]


def test_built_ins_are_registered_by_name() -> None:
    load_resolved(Path(__file__).resolve().parents[1] / "params.yaml")  # imports every built-in
    assert {"flip", "asymmetric", "missing", "noise", "bias", "confidence", "flaw"} <= set(CHANNELS.names())
    assert {"clean", "lenient_contains", "any_box", "trigger_phrase"} <= set(CHECKERS.names())
    assert set(AGGREGATIONS.names()) == {"mean", "majority", "confidence_weighted", "min"}
    assert {"baseline", "robust"} <= set(METHODS.names())
    assert {"strict_share", "no_answer_share"} <= set(REPORT_METRICS.names())


def test_plugins_for_every_extension_point_train_and_evaluate(project, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    args = [part for setting in PLUGIN_SETTINGS for part in ("--set", setting)]
    runner = CliRunner()
    prepared = runner.invoke(app, ["prepare", *args])
    assert prepared.exit_code == 0, prepared.output
    manifest = json.loads((project / "cache/datasets/arith/manifest.json").read_text())
    assert manifest["provider"] == "extension_plugin:arith_reversed"
    trained = runner.invoke(app, ["train", *args])
    assert trained.exit_code == 0, trained.output
    run_dir = project / "cache/artifacts/runs/plugins"
    records = [row for path in sorted((run_dir / "generations").glob("step-*.jsonl")) for row in read_jsonl(path)]
    assert [r["step"] for r in records] == [1] * 8 + [2] * 8
    for record in records:
        # the plugin checker judged m0, the plugin channel corrupted it with its own setting ...
        assert record["member.m0.reason"].removeprefix("stubborn:").startswith("last_number:")
        if record["member.m0.reason"].startswith("stubborn:"):
            assert record["member.m0.reward"] == 0.25
        # ... the plugin aggregation took m0's word, the plugin method chose what was optimised ...
        assert record["reward"] == record["member.m0.reward"]
        assert record["optimised_reward"] == pytest.approx(record["reward"] - 0.5 * record["U"])
        # ... and the plugin reward got the think tags it declared it needs
        closed = "<think>" in record["completion"] and "</think>" in record["completion"]
        assert record["extension_plugin:closed_think_reward"] == (0.1 if closed else 0.0)
        assert record["method"] == "extension_plugin:half_penalty"

    evaluated = runner.invoke(
        app, ["eval", "--model", str(run_dir / "checkpoints/permanent/step-2"), "--metrics-dir", "metrics", *args]
    )
    assert evaluated.exit_code == 0, evaluated.output
    metrics = json.loads((project / "metrics/eval.json").read_text())
    samples = read_jsonl(next((project / "cache/artifacts/eval").glob("*/base/generations.jsonl")))
    assert metrics["report/boxed_share"] == sum("\\boxed{" in s["completion"] for s in samples) / len(samples)
    assert 0.0 <= metrics["report/strict_share"] <= 1.0
    assert metrics["machine"]["cpu"] and metrics["machine"]["flags"]["avx2"] in ("yes", "no", None)  # who made it


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("corruption.channel=asymetric", "corruption.channel: unknown corruption channel 'asymetric' (did you mean 'asymmetric'?)"),
        ("verifier.aggregation=mena", "verifier.aggregation: unknown aggregation 'mena' (did you mean 'mean'?)"),
        ("method=extension_plugin:nothing_here", "method: 'extension_plugin:nothing_here': module 'extension_plugin' has no attribute"),
        ("corruption.channel=math:pi", "corruption.channel: corruption channel 'math:pi' is float 3.14"),
        ("corruption.kwargs.value=2", "corruption.kwargs.value: unknown setting (this one takes none)"),
        ("method=extension_plugin:half_penalty",
         "method: extension_plugin:half_penalty needs two members or more (one member never disagrees)"),
    ],
)
def test_validate_checks_names_against_the_registries(setting, line, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    result = CliRunner().invoke(app, ["validate", "-c", str(params), "--set", setting])
    assert result.exit_code == 2, result.output
    assert line in result.output, result.output


SRC = Path(__file__).resolve().parents[1] / "src" / "hackable_rl"
SCHEMA_DEFAULTS = {("experiment.py", "baseline"), ("study.py", "baseline")}
"""The schemas' default methods (a run's, a study's reference): values, not code that branches on a name."""


def _code_strings(path: Path) -> list[str]:
    """Every string constant of `path`'s code (f-string parts included), docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    docstrings |= {id(node.value) for node in ast.walk(tree)  # a field's docstring, under its assignment
                   if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_report_payoff_or_schema_code_names_a_built_in() -> None:
    """Report roles, canonical exploits and settings are declared by each extension (its own file and
    registration), so the report, the payoff table and the schema hold no built-in's name."""
    load_resolved(Path(__file__).resolve().parents[1] / "params.yaml")
    names = set(METHODS.names()) | set(CHECKERS.names()) - {"clean"}  # "clean": also the rate-0 condition
    files = [path for folder in ("report", "payoff", "config") for path in sorted((SRC / folder).glob("*.py"))]
    named = sorted({(path.name, name) for path in files for text in _code_strings(path) for name in names
                    if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)} - SCHEMA_DEFAULTS)
    assert named == []


DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _extension_kinds() -> list[list[str]]:
    """The rows of docs/extending.md's table of extension kinds, each cell without its backticks."""
    block = DOC.read_text().split("<!-- extension-kinds -->")[1].split("<!-- /extension-kinds -->")[0]
    lines = block.strip().splitlines()[2:]  # below the head and its rule
    return [[cell.strip().strip("`") for cell in line.strip().strip("|").split("|")] for line in lines]


def test_the_table_of_extension_kinds_is_true(monkeypatch) -> None:
    """Every registry has a row; its built-in file registers that kind; its plugin loads as that kind
    from one file in tests/plugins/; its test exercises the plugin."""
    import hackable_rl.core.registry as registry

    monkeypatch.syspath_prepend(str(PLUGINS))
    root = DOC.parents[1]
    load_resolved(root / "params.yaml")
    registries = {name: value for name, value in vars(registry).items() if isinstance(value, registry.Registry)}
    rows = _extension_kinds()
    assert sorted(row[1] for row in rows) == sorted(registries) and len(rows) == 8
    for kind, name, _declares, _settings, built_in, plugin, test in rows:
        registry_ = registries[name]
        assert registry_.kind.endswith(kind), (kind, registry_.kind)
        assert f"register_{kind.replace(' ', '_')}(" in (root / built_in).read_text(), built_in
        module, attr = plugin.split(":")
        assert (root / module).parent == PLUGINS
        registry_.load(f"{Path(module).stem}:{attr}")
        assert attr in (root / test).read_text() or Path(module).stem in (root / test).read_text(), test
