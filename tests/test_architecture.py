"""The floors of the house, checked from the source: `answers/` at the bottom imports nothing above
it, `verifiers/` never imports `rewards/` (or the scoring that sits on both), and no function or
file outgrows what a reader takes in at once (config.py is one source of truth and may be long)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hackable_rl"
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 450
LONG_FILES_ALLOWED = {"config.py"}


def _imports(path: Path) -> set[str]:
    """Every hackable_rl module `path` imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return {name for name in names if name.startswith("hackable_rl")}


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("answers"), ids=lambda p: p.name)
def test_answers_is_the_bottom_floor(path: Path) -> None:
    allowed = {"hackable_rl.answers", "hackable_rl.registry"}
    above = {name for name in _imports(path) if not any(name.startswith(a) for a in allowed)}
    assert above == set(), f"{path.name} imports {above}"


@pytest.mark.parametrize("path", _modules("verifiers"), ids=lambda p: p.name)
def test_verifiers_do_not_import_rewards(path: Path) -> None:
    upward = {name for name in _imports(path) if name.startswith(("hackable_rl.rewards", "hackable_rl.scoring"))}
    assert upward == set(), f"{path.name} imports {upward}"


def test_no_lazy_import_workaround_is_left() -> None:
    lazy = [p.relative_to(PACKAGE) for p in PACKAGE.rglob("__init__.py") if "def __getattr__" in p.read_text()]
    assert lazy == []


def test_functions_and_files_stay_short() -> None:
    long_functions, long_files = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > MAX_FILE_LINES and path.name not in LONG_FILES_ALLOWED:
            long_files.append(f"{path.relative_to(PACKAGE)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length} lines")
    assert long_functions == [] and long_files == [], long_functions + long_files
