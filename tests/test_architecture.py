"""The floors of the house, checked from the source: the import graph has no circle, `answers/` at
the bottom imports nothing above it, the reward's checkers, corruption and ensemble never import its
objective (the reward functions, the objectives, the pipeline that sits on both), and no function or file outgrows what a reader takes in at once: every file stays comfortably
inside its limit (under COMFORTABLE_SHARE of it), so the next change does not force a split by accident."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hackable_rl"
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 450
COMFORTABLE_SHARE = 0.9
"""No file within 10% of MAX_FILE_LINES: a file that grows there is split along its sections by design."""


def _imports(path: Path) -> set[str]:
    """Every hackable_rl module `path` imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return {name for name in names if name.startswith("hackable_rl")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports, at the top or inside a function. `from a import b`
    is an edge to `a.b` when b is a module, else to `a`; importing `p.q` from outside package `p` runs
    `p/__init__.py` too, so it is also an edge to `p`. Imports under `if TYPE_CHECKING:` never run
    and are left out."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = {id(n) for node in ast.walk(tree) if _is_type_checking(node) for n in ast.walk(node)}
        targets = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                               for a in node.names)
        owners = {_owner(target, modules) for target in targets} - {None, name}
        graph[name] = owners | {package for owner in owners for package in _outer_packages(owner, name)}
    return graph


def _outer_packages(module: str, importer: str) -> set[str]:
    """The packages above `module` whose `__init__` an import from `importer` runs first."""
    parts = module.split(".")
    packages = {".".join(parts[:end]) for end in range(2, len(parts))}
    return {p for p in packages if importer != p and not importer.startswith(p + ".")}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}


def _owner(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target, path + [target])):
                return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def test_the_import_graph_has_no_circle() -> None:
    graph = _import_graph()
    assert len(graph) > 100 and "hackable_rl.config.experiment" in graph["hackable_rl.config.loading"]
    cycle = _a_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_one() -> None:
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


FLOORS = (
    ("bottom", {"hackable_rl", "core"}),
    ("schema and loading", {"config"}),
    ("answers", {"answers"}),
    ("the reward", {"reward"}),
    ("evaluation", {"evaluation"}),
    ("data", {"data"}),
    ("models", {"models"}),
    ("tracking", {"tracking"}),
    ("resolving a config's names to extensions", {"extensions"}),
    ("the payoff table", {"payoff"}),
    ("the hacking alarm", {"alarm"}),
    ("stages", {"training", "warmstart"}),
    ("the parts for a user's own TRL script", {"trl_parts"}),
    ("the eval stage", {"evaluation.stage"}),
    ("running a study and its records", {"study"}),
    ("the alarm's benchmark", {"alarm.bench"}),
    ("scheduling", {"scheduling"}),
    ("report", {"report"}),
    ("command line", {"cli", "__main__"}),
)
"""The floors of the package, bottom first: a folder (or a module at the root) imports only from its
own floor or a floor below (docs/architecture.md draws them). A folder's sub-package named here
(`evaluation.stage`) is a unit of its own, on its own floor."""

NESTED_UNITS = {unit for _, units in FLOORS for unit in units if "." in unit}


def _unit(module: str) -> str:
    """The root module, top folder or nested unit (NESTED_UNITS) `module` belongs to (`hackable_rl` for
    the package itself)."""
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in NESTED_UNITS:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def _unit_edges(graph: dict[str, set[str]]) -> set[tuple[str, str, str, str]]:
    """(importer's unit, imported unit, importer, imported) for every import between two units."""
    return {(_unit(a), _unit(b), a, b) for a, targets in graph.items() for b in targets if _unit(a) != _unit(b)}


def test_every_import_runs_down_the_floors() -> None:
    floor = {unit: index for index, (_, units) in enumerate(FLOORS) for unit in units}
    graph = _import_graph()
    unplaced = sorted({_unit(module) for module in graph} - set(floor))
    assert unplaced == [], f"place these in FLOORS: {unplaced}"
    upward = sorted(f"{a} -> {b} ({FLOORS[floor[ua]][0]} -> {FLOORS[floor[ub]][0]})"
                    for ua, ub, a, b in _unit_edges(graph) if floor[ua] < floor[ub])
    assert upward == [], "imports up the floors: " + "; ".join(upward)


ALARM_FLOORS = (
    ("signals", {"signals", "window_detector"}),
    ("the alarm", {"onset_alarm"}),
    ("what reads a run beside the alarm", {"audit", "truncation_probe", "onset"}),
    ("the benchmark", {"bench"}),
)
"""The alarm package's own floors, bottom first (`hackable_rl/alarm/__init__.py` names them)."""


def test_the_alarm_package_imports_down_its_own_floors() -> None:
    floor = {name: index for index, (_, names) in enumerate(ALARM_FLOORS) for name in names}
    inside = [module for module in _import_graph() if module.startswith("hackable_rl.alarm.")]
    unplaced = sorted({module.split(".")[2] for module in inside} - set(floor))
    assert unplaced == [], f"place these in ALARM_FLOORS: {unplaced}"
    graph = _import_graph()
    upward = sorted(f"{a} -> {b}" for a in inside for b in graph[a] if b.startswith("hackable_rl.alarm.")
                    and floor[a.split(".")[2]] < floor[b.split(".")[2]])
    assert upward == [], "imports up the alarm's floors: " + "; ".join(upward)


def test_no_two_folders_import_each_other() -> None:
    units: dict[str, set[str]] = {}
    for ua, ub, _, _ in _unit_edges(_import_graph()):
        units.setdefault(ua, set()).add(ub)
        units.setdefault(ub, set())
    cycle = _a_cycle(units)
    assert cycle is None, "folder-level import circle: " + " -> ".join(cycle)


def test_loading_a_config_imports_no_extension() -> None:
    """`config.loading` reads and validates; resolving names to extensions is `extensions`' step."""
    graph, seen, todo = _import_graph(), set(), ["hackable_rl.config.loading"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    assert {_unit(module) for module in seen} <= FLOORS[0][1] | FLOORS[1][1], sorted(seen)


def test_the_schema_imports_nothing_above_it() -> None:
    below = {"hackable_rl.core", "hackable_rl.core.bounds", "hackable_rl.config.field_types", "hackable_rl.core.storage",
             "hackable_rl.core.errors"}
    parts = {"hackable_rl.config.section", "hackable_rl.config.data_sections", "hackable_rl.config.evaluation_sections",
             "hackable_rl.config.reward_sections", "hackable_rl.config.training_sections"}  # the schema's own sections
    graph = _import_graph()
    assert graph["hackable_rl.config.experiment"] <= below | parts, graph["hackable_rl.config.experiment"]
    for part in parts:
        assert graph[part] <= below | parts, graph[part]


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("answers"), ids=lambda p: p.name)
def test_answers_is_the_bottom_floor(path: Path) -> None:
    allowed = {"hackable_rl.answers", "hackable_rl.core.registry"}
    above = {name for name in _imports(path) if not any(name.startswith(a) for a in allowed)}
    assert above == set(), f"{path.name} imports {above}"


OBJECTIVE_SIDE = ("functions", "objectives", "pipeline", "records", "advantages", "methods")
"""The reward's modules from the method on: what its checkers, corruption and ensemble sit under."""


@pytest.mark.parametrize("path", [p for p in _modules("reward") if p.parent.name == "reward" and p.stem not in OBJECTIVE_SIDE],
                         ids=lambda p: p.name)
def test_checkers_do_not_import_the_objective(path: Path) -> None:
    upward = {name for name in _imports(path) if name.startswith(tuple(f"hackable_rl.reward.{m}" for m in OBJECTIVE_SIDE))}
    assert upward == set(), f"{path.name} imports {upward}"


def test_no_lazy_import_workaround_is_left() -> None:
    lazy = [p.relative_to(PACKAGE) for p in PACKAGE.rglob("__init__.py") if "def __getattr__" in p.read_text()]
    assert lazy == []


def test_functions_and_files_stay_short() -> None:
    long_functions, long_files = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > COMFORTABLE_SHARE * MAX_FILE_LINES:
            long_files.append(f"{path.relative_to(PACKAGE)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length} lines")
    assert long_functions == [] and long_files == [], long_functions + long_files
