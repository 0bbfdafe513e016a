"""Reading a params file: YAML with its security guards, dotted `--set` overrides and validation.

`load_config(path, overrides)` reads and validates; it imports no extension. Resolving the names the
config holds to extensions (registries, plugins, their settings) is a separate step above it,
`hackable_rl.extensions.resolve_config`, which every command runs next (`load_resolved`). Errors
come back as `ConfigError`, one line per problem.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import ConfigError

__all__ = [
    "ConfigError",
    "ConfigLoader",
    "apply_overrides",
    "describe_fields",
    "describe_problem",
    "flatten_config",
    "load_config",
    "parse_override",
    "read_yaml",
    "validate_config",
]


def load_config(path: str | Path = "params.yaml", overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Reads `path`, applies dotted `overrides`, validates the fields and returns the frozen config
    (its extension names are not resolved here: `hackable_rl.extensions.load_resolved`)."""
    path = Path(path)
    return validate_config(apply_overrides(read_yaml(path), overrides), str(path))


def parse_override(text: str) -> tuple[str, Any]:
    """`a.b=value` -> ("a.b", value), the value read as YAML (so 0.4 is a float, [1,2] a list)."""
    if "=" not in text:
        raise ConfigError([f"--set {text!r}: expected KEY=VALUE, e.g. corruption.rate=0.4"])
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError([f"--set {text!r}: {key!r} is not a dotted key such as corruption.rate"])
    try:
        value = yaml.load(raw, Loader=ConfigLoader) if raw.strip() else ""
    except RefusedYAML as error:
        raise ConfigError([f"--set {key}: {error.problem}"]) from None
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Returns a copy of `raw` with each `a.b=value` override applied (missing sections are created)."""
    merged = _deep_copy(raw)
    for text in overrides:
        key, value = parse_override(text)
        node = merged
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return merged


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _deep_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_deep_copy(item) for item in value]
    return value


# A params file has a few hundred nodes; a YAML "billion laughs" (anchors nested 9 deep, 10 aliases
# each) composes to a small graph but expands to 10**9 nodes in the copy and validation that follow.
MAX_YAML_NODES = 100_000


class RefusedYAML(yaml.MarkedYAMLError):
    """Well-formed YAML that a params file must not be (a duplicate key, an alias bomb)."""


class ConfigLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses what YAML itself would silently accept: a key given twice in one
    mapping (YAML keeps the last value) and aliases that expand to more than MAX_YAML_NODES nodes."""

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_expanded_size(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, bool):  # YAML 1.1 reads `on:`, `yes:`, `no:` as keys true and false
                problem = f"key {key_node.value!r} reads as the boolean {key} under YAML 1.1; quote it ('{key_node.value}')"
                raise RefusedYAML(None, None, problem, key_node.start_mark)
            if not isinstance(key, str | int | float | bool):
                continue  # an unhashable key: SafeConstructor says so below
            if key in first_line:
                problem = f"duplicate key {key!r} (first given on line {first_line[key]}); YAML would keep only the last value"
                raise RefusedYAML(None, None, problem, key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        self._refuse_merged_twice(node, first_line)
        return super().construct_mapping(node, deep)

    def _refuse_merged_twice(self, node: yaml.MappingNode, first_line: dict[Any, int]) -> None:
        """A key a merge (`<<: *base`, `<<: [*a, *b]`) brings in that the mapping also gives, or that two
        merged mappings both give: YAML keeps one value without a word, so it is refused, with both lines."""
        for key_node, value_node in node.value:
            if key_node.tag != "tag:yaml.org,2002:merge":
                continue
            merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for mapping in merged:
                if not isinstance(mapping, yaml.MappingNode):
                    continue  # not a mapping: SafeConstructor refuses the merge below
                for inner_key, _ in mapping.value:
                    if inner_key.tag == "tag:yaml.org,2002:merge" or not isinstance(inner_key, yaml.ScalarNode):
                        continue
                    key = self.construct_object(inner_key, deep=True)
                    if key in first_line:
                        problem = (f"key {key!r} is set twice: on line {first_line[key]} and by the merge on line "
                                   f"{key_node.start_mark.line + 1} (from line {inner_key.start_mark.line + 1}); "
                                   "YAML would keep one without a word")
                        raise RefusedYAML(None, None, problem, key_node.start_mark)
                    first_line[key] = inner_key.start_mark.line + 1


    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """YAML 1.1 reads `010` as the octal 8 and `1:30` as the base-60 90: refused, naming the line."""
        text = str(node.value).replace("_", "")
        if re.fullmatch(r"[-+]?0[0-7]+", text) or ":" in text:
            value = super().construct_yaml_int(node)
            problem = (f"{node.value!r} reads as the number {value} under YAML 1.1 (octal or base 60); "
                       f"write it without the leading zero or colon, or quote it")
            raise RefusedYAML(None, None, problem, node.start_mark)
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # longer than Python reads (sys.get_int_max_str_digits()): its line, no traceback
            digits = sum(character.isdigit() for character in text)
            raise RefusedYAML(None, None, f"an integer of {digits} digits is too long to read; no setting takes one",
                              node.start_mark) from None


ConfigLoader.add_constructor("tag:yaml.org,2002:int", ConfigLoader.construct_yaml_int)


def _check_expanded_size(root: yaml.Node) -> None:
    """Counts the nodes of the document with every alias expanded, without expanding any (each
    node's size is computed once); refuses a document over MAX_YAML_NODES and an alias to itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if id(node) in open_nodes:
            raise RefusedYAML(None, None, "an alias refers to the node that contains it", node.start_mark)
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise RefusedYAML(None, None, "an alias refers to the node that contains it", child.start_mark)
            stack.append((child, False))
    if sizes[id(root)] > MAX_YAML_NODES:
        raise RefusedYAML(
            None, None, f"aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)", root.start_mark
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_yaml(path: Path) -> dict[str, Any]:
    """Reads a YAML mapping with `ConfigLoader`; a missing, unreadable, empty or malformed file is a
    ConfigError that names the file (and the line where there is one)."""
    if path.is_dir():
        raise ConfigError([f"{path}: is a folder; expected a YAML file"])
    if not path.exists():
        raise ConfigError([f"{path}: no such config file (pass --config PATH)"])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigError([f"{path}:{line}: not UTF-8 text (byte 0x{raw[error.start]:02x}); save the file as UTF-8"]) from None
    try:
        data = yaml.load(text, Loader=ConfigLoader)
    except yaml.reader.ReaderError as error:
        line = text[: error.position].count("\n") + 1
        raise ConfigError([f"{path}:{line}: not valid YAML (character #x{error.character:02x} is not allowed)"]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or error
        line = f"{where}: {problem}" if isinstance(error, RefusedYAML) else f"{where}: not valid YAML ({problem})"
        raise ConfigError([line]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid YAML (nested too deeply)"]) from None
    if data is None:
        raise ConfigError([f"{path}: is empty; expected a mapping of sections (see params.yaml)"])
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}"])
    return data


# --------------------------------------------------------------------------- validation


def validate_config(raw: Mapping[str, Any], source: str | None = None) -> ExperimentConfig:
    """Validates a plain mapping; raises ConfigError with one line per problem."""
    try:
        return ExperimentConfig.model_validate(dict(raw))
    except ValidationError as error:
        problems = [_with_file(describe_problem(item), item, source) for item in error.errors()]
        raise ConfigError(problems, source) from None


def _with_file(problem: str, item: Mapping[str, Any], source: str | None) -> str:
    """A top-level key the schema does not know is named with its file: such a key usually means a
    file that is not a params file at all (a JSONL given as --config)."""
    unknown_top_level = item.get("type") == "extra_forbidden" and len(item.get("loc", ())) == 1
    return f"{source}: {problem}" if source and unknown_top_level else problem


def flatten_config(config: BaseModel | Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flattens a config into `section.key` -> value (lists and dicts below a field stay whole)."""
    data = config.model_dump(mode="json") if isinstance(config, BaseModel) else config
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value) and key != "kwargs":
            flat.update(flatten_config(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def describe_fields(model: type, prefix: str = "") -> list[str]:
    """`section.field: its description`, one line per field (`hackable-rl validate --explain`)."""
    lines = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.extend(describe_fields(annotation, f"{prefix}{name}."))
        else:
            lines.append(f"{prefix}{name}: {' '.join((field.description or '').split())}")
    return lines


# --------------------------------------------------------------------------- error lines


def describe_problem(item: Mapping[str, Any]) -> str:
    """One line per Pydantic error: `<dotted path>: <value> <what is allowed>`."""
    location = [str(part) for part in item["loc"]]
    path = ".".join(location)
    kind = item["type"]
    message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        return f"{path}: unknown key{_suggestion(location)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "value_error" and message.split(":", 1)[0].count(".") >= 1 and " " not in message.split(":", 1)[0]:
        return message  # a derived-value check that already names its dotted path
    if kind == "value_error":
        return f"{path}: {message}"
    if kind in {"literal_error", "enum"}:
        return f"{path}: {item.get('input')!r} is not allowed ({message.removeprefix('Input should be ')})"
    got = item.get("input")
    return f"{path}: got {got!r} ({type(got).__name__}); {message.replace('Input should be', 'expected')}"


def _suggestion(location: list[str]) -> str:
    """` (did you mean X?)` from the fields of the section that holds the unknown key."""
    model: type[BaseModel] | None = ExperimentConfig
    for part in location[:-1]:
        field = model.model_fields.get(part) if model else None
        annotation = field.annotation if field else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if model is None:
        return ""
    close = difflib.get_close_matches(location[-1], list(model.model_fields), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (allowed: {', '.join(model.model_fields)})"
