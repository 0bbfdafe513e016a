"""Generated blocks in the docs: every number README.md and docs/results.md restate from a committed
result file is rendered from it, and `hackable-rl docs-blocks` rewrites the blocks in place
(`--check`: says which are stale, writes nothing). The syntax and the kinds: docs/results.md, "How the
numbers here are made".

    <!-- generated: KIND SOURCE [OPTION=VALUE ...] [TEMPLATE LINES] -->
    what the command renders
    <!-- end generated -->

On one line the block is a fragment inside a sentence; over several, the markers stand on lines of
their own. KIND is one of `value`, `comparison`, `text`, `table`, `outcomes` (`KINDS`); SOURCE a
committed file relative to the repository root, or several as `alias=path` (each placeholder's path
then starts with its alias); paths and formats: `report.docs_values`. A template's placeholders are
`{PATH:FORMAT}`; `{{` and `}}` stand for literal braces.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from hackable_rl.core.errors import UserError
from hackable_rl.core.safe_write import not_a_readable_file_problem, replace_file
from hackable_rl.report.docs_values import Sources, format_value, resolve

__all__ = ["Block", "KINDS", "check_docs", "docs_files", "find_blocks", "render_text", "rewrite_docs", "stale_blocks"]

OPEN = "<!-- generated:"
CLOSE = "-->"
END = "<!-- end generated -->"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}:]*)(?::([^{}]*))?\}")


@dataclass(frozen=True)
class Block:
    """One generated block: where it sits in its file, what it asks for, what it holds now."""

    doc: str
    line: int
    start: int
    """Offset of the rendered text (just after the opening comment)."""
    end: int
    """Offset of the end marker."""
    kind: str
    arguments: tuple[str, ...]
    body: str
    """The opening comment's lines after the first: a `text` or `table` template."""
    current: str

    @property
    def multiline(self) -> bool:
        return self.current.startswith("\n")

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _in_code(text: str, start: int, fenced: bool) -> bool:
    """A marker shown as an example: inside a fenced code block, or inside inline code on its line."""
    line_start = text.rfind("\n", 0, start) + 1
    return fenced or text.count("`", line_start, start) % 2 == 1


def _fences(text: str, start: int, end: int) -> int:
    """How many code fences (lines starting with ```) open or close between two offsets."""
    return len(re.findall(r"^```", text[start:end], flags=re.M))


def find_blocks(text: str, doc: str) -> list[Block]:
    """Every generated block of a file, in order (a marker in code is an example, not a block); a
    UserError naming the line of a malformed one."""
    blocks, position, fenced = [], 0, False
    while (start := text.find(OPEN, position)) >= 0:
        fenced ^= _fences(text, position, start) % 2 == 1
        if _in_code(text, start, fenced):
            position = start + len(OPEN)
            continue
        line = text.count("\n", 0, start) + 1
        close = text.find(CLOSE, start)
        end = text.find(END, close)
        if close < 0 or end < 0:
            raise UserError(f"{doc}:{line}: a generated block without its `{END}`")
        if text.find(OPEN, close, end) >= 0:
            raise UserError(f"{doc}:{line}: a generated block opens inside another; close it with `{END}`")
        header, _, body = text[start + len(OPEN):close].partition("\n")
        try:
            words = tuple(shlex.split(header))
        except ValueError as problem:
            raise UserError(f"{doc}:{line}: the block's first line does not parse ({problem})") from None
        if not words:
            raise UserError(f"{doc}:{line}: a generated block names no kind (one of {', '.join(KINDS)})")
        blocks.append(Block(doc, line, close + len(CLOSE), end, words[0], words[1:], body.rstrip(),
                            text[close + len(CLOSE):end]))
        position = end + len(END)
    return blocks


def docs_files(root: Path) -> list[Path]:
    """README.md, every docs/*.md and every pipelines/*/README.md under `root` that holds a generated
    block (a study's README restates its results too; sources stay relative to `root`)."""
    candidates = [root / "README.md", *sorted((root / "docs").glob("*.md")),
                  *sorted((root / "pipelines").glob("*/README.md"))]
    return [path for path in candidates if path.is_file() and OPEN in path.read_text()]


def _read_docs(paths: list[Path], root: Path) -> dict[Path, str]:
    problems = [f"{path}: {problem}" for path in paths if (problem := not_a_readable_file_problem(path))]
    if problems:
        raise UserError(*problems)
    return {path: path.read_text() for path in paths}


def _name(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix() if path.resolve().is_relative_to(root.resolve()) else str(path)


def rewrite_docs(paths: list[Path], root: Path) -> list[str]:
    """Every block of each file rendered again from the committed files under `root`, the file rewritten
    only where a block changed; one line per file: how many blocks, how many rewritten."""
    sources, lines = Sources(root), []
    for path, text in _read_docs(paths, root).items():
        doc = _name(path, root)
        stale = stale_blocks(text, doc, sources)
        if stale:
            with replace_file(path) as handle:
                handle.write(render_text(text, doc, sources))
        lines.append(f"{doc}: {len(find_blocks(text, doc))} generated blocks, {len(stale)} rewritten")
    return lines


def check_docs(paths: list[Path], root: Path) -> list[str]:
    """One line per stale block of the files (nothing written)."""
    sources = Sources(root)
    return [line for path, text in _read_docs(paths, root).items() for line in stale_blocks(text, _name(path, root), sources)]


def render_text(text: str, doc: str, sources: Sources) -> str:
    """The file's text with every block rendered again from its sources."""
    pieces, position = [], 0
    for block in find_blocks(text, doc):
        pieces += [text[position:block.start], render_block(block, sources)]
        position = block.end
    return "".join(pieces) + text[position:]


def stale_blocks(text: str, doc: str, sources: Sources) -> list[str]:
    """`doc:line: KIND SOURCE ... is stale` for each block whose text differs from what it renders."""
    return [f"{block.where()}: {block.kind} {' '.join(block.arguments)} is stale (run hackable-rl docs-blocks)"
            for block in find_blocks(text, doc) if render_block(block, sources) != block.current]


def render_block(block: Block, sources: Sources) -> str:
    """What the block holds once rendered: its kind's text, on lines of its own for a multi-line block."""
    if block.kind not in KINDS:
        raise UserError(f"{block.where()}: unknown block kind {block.kind!r} (one of {', '.join(KINDS)})")
    rendered = KINDS[block.kind](_Context(block, sources))
    return f"\n{rendered}\n" if block.multiline else rendered


class _Context:
    """A block's sources and options, and its errors, each one line naming the doc, the file and the key."""

    def __init__(self, block: Block, sources: Sources):
        self.block, self.sources = block, sources
        self.files: dict[str, str] = {}
        self.options: dict[str, str] = {}
        self.positional: list[str] = []
        for word in block.arguments:
            name, equals, value = word.partition("=")
            if equals and value.endswith((".json", ".csv")):
                self.files[name] = value
            elif equals and name in _OPTIONS:
                self.options[name] = value
            elif not equals and word.endswith((".json", ".csv")) and not self.files:
                self.files[""] = word
            else:
                self.positional.append(word)
        if not self.files:
            self.fail("names no source file (a committed .json or .csv, relative to the repository root)")

    def fail(self, problem: str) -> NoReturn:
        raise UserError(f"{self.block.where()}: {self.block.kind}: {problem}")

    def value(self, path: str, base: Any = None) -> Any:
        """The value at `path` in the block's source (its alias first where the block names several;
        under `at=` where given), or, for a table's row, in `base`."""
        alias, rest = "", path.strip()
        if base is None and "" not in self.files:
            alias, _, rest = rest.partition(".")
            if alias not in self.files:
                self.fail(f"{path!r}: starts with no source alias (one of {', '.join(self.files)})")
        source = self.files.get(alias) or next(iter(self.files.values()))
        try:
            document = self.sources.load(source) if base is None else base
        except UserError as problem:
            self.fail(str(problem))
        at = self.options.get("at", "") if base is None else ""
        whole = ".".join(part for part in (at, rest) if part)
        try:
            return resolve(document, whole)
        except KeyError as missing:
            self.fail(f"{source}: no key {missing.args[0]} (path {whole!r}{' in a row' if base is not None else ''})")

    def formatted(self, value: Any, spec: str, path: str) -> str:
        try:
            return format_value(value, spec)
        except (ValueError, TypeError) as problem:
            self.fail(f"{path!r}: format {spec!r}: {problem}")

    def fill(self, template: str, base: Any = None) -> str:
        """The template with every placeholder replaced."""
        def replace(match: re.Match) -> str:
            if match.group(0) in ("{{", "}}"):
                return match.group(0)[0]
            path, spec = match.group(1), match.group(2) or ""
            return self.formatted(self.value(path, base), spec.strip(), path)
        return _PLACEHOLDER.sub(replace, template)


_OPTIONS = ("at", "rows", "p")


def _value(context: _Context) -> str:
    if not context.positional:
        context.fail("names no path (value SOURCE PATH [FORMAT])")
    path, spec = context.positional[0], " ".join(context.positional[1:])
    return context.formatted(context.value(path), spec, path)


def _comparison(context: _Context) -> str:
    """`+0.135 [+0.102, +0.168], Holm p 0.019, amended 0.017`: a comparison with its declared family's p
    (raw where it has none) and the amended family's beside it where a deviation gives another; `p=raw`
    the raw p, `p=none` the interval alone."""
    path = context.positional[0] if context.positional else ""
    entry = context.value(path)
    shown = context.options.get("p", "auto")
    if shown not in ("auto", "raw", "none"):
        context.fail(f"p={shown}: one of auto, raw, none")
    text = context.formatted(entry, "ci" if shown == "none" else "cip", path)
    if shown == "raw" and entry.get("p_holm") is not None:
        return f"{context.formatted(entry, 'ci', path)}, raw p {format_value(entry.get('p_value'), 'p')}"
    return text


def _text(context: _Context) -> str:
    template = context.block.body if context.block.body.strip() else " ".join(context.positional)
    if not template.strip():
        context.fail("has no template (its lines after the first, or one quoted word)")
    return context.fill(template)


def _table(context: _Context) -> str:
    """Literal lines as they are; each line with a placeholder once per row of `rows=PATH`: paths
    separated by `;`, each one row, or every entry of a list, a `[field=value]*` selection or a mapping
    (`ceilings.*`) it names; `{@row}` stands for the row's path (a compare.json entry's name) or the
    mapping entry's key."""
    if "rows" not in context.options:
        context.fail("needs rows=PATH (a list, a [field=value]* selection, or paths separated by ;)")
    rows: list[tuple[str, Any]] = []
    for path in context.options.pop("rows").split(";"):
        parent = context.value(path[:-2]) if path.endswith(".*") else None
        if isinstance(parent, dict):  # a mapping's entries: `{@row}` is each one's key
            rows += list(parent.items())
            continue
        found = context.value(path)
        rows += [(path, row) for row in (found if isinstance(found, list) else [found])]
    lines = context.block.body.splitlines()
    literal = [line for line in lines if not _PLACEHOLDER.search(line.replace("{{", "").replace("}}", ""))]
    templates = [line for line in lines if line not in literal]
    return "\n".join([*literal, *(context.fill(line.replace("{@row}", path), row)
                                   for path, row in rows for line in templates)])


def _outcomes(context: _Context) -> str:
    """A study's declared outcomes (`rows=`, default every primary one) with the words of docs/metrics.md and
    the MDE; the amended family's Holm p beside the declared one where the study records a deviation."""
    rows = context.value(context.options.get("rows", "[secondary=false]*"))
    amended = any("p_holm_amended" in row for row in rows)
    head = ["outcome", "cell", "A", "B", "A - B [95% CI]", "per replicate", "Holm p, declared",
            *(["Holm p, amended (deviation)"] if amended else []), "reading", "MDE"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        values = [f"{row['name']} ({row['metric']})", row["cell"], f"{row['a']} {format_value(row['mean_a'])}",
                  f"{row['b']} {format_value(row['mean_b'])}", format_value(row, "ci"),
                  format_value(row["per_replicate"], "+.3f"), _holm_text(row),
                  *([format_value(row.get("p_holm_amended"), "p")] if amended else []),
                  format_value(row, "reading"), format_value(row.get("mde"), ".3f")]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def _holm_text(row: dict) -> str:
    if row.get("p_holm") is not None:
        return format_value(row["p_holm"], "p")
    return "secondary (raw " + format_value(row.get("p_value"), "p") + ")"


KINDS: dict[str, Callable[[_Context], str]] = {
    "value": _value, "comparison": _comparison, "text": _text, "table": _table, "outcomes": _outcomes}
