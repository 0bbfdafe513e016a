"""The repository carries the data it uses (data/README.md), and nothing points outside it: a DVC
temporary workspace (`dvc exp run --temp`, `--queue`) is a copy of the repository alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from hackable_rl.core.storage import file_sha256

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
PINNED = re.findall(r"^\| `([^`]+\.jsonl)` \|.*\| `([0-9a-f]{64})` \|", (DATA / "README.md").read_text(), re.MULTILINE)
# Folders whose text files name data paths; data/README.md itself names where its copies came from.
SEARCHED = ("src", "tests", "pipelines", "configs", "docs", "benchmarks", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".cfg", ""}
# Built from parts so that this file does not match itself.
OUTSIDE_DATA = "/".join(("shared", "data"))


def test_readme_pins_every_data_file():
    assert {path for path, _ in PINNED} == {str(p.relative_to(DATA)) for p in DATA.rglob("*.jsonl")}
    assert len(PINNED) == 3


@pytest.mark.parametrize(("name", "sha256"), PINNED, ids=[name for name, _ in PINNED])
def test_data_file_matches_its_pinned_sha256_and_has_a_licence(name, sha256):
    path = DATA / name
    assert file_sha256(path) == sha256, f"{path} changed: restore it, or pin the new file in data/README.md"
    assert "MIT License" in (path.parent / "LICENSE").read_text()


def _text_files():
    yield REPO / "README.md"
    yield REPO / "Makefile"
    for folder in SEARCHED:
        for path in sorted((REPO / folder).rglob("*")):
            parts = path.relative_to(REPO).parts  # runtime folders and DVC's own are not sources
            generated = {"cache", ".dvc", "__pycache__"} & set(parts) or any(p.endswith(".egg-info") for p in parts)
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not generated:
                yield path


def test_nothing_reads_data_from_outside_the_repository():
    offenders = [str(path.relative_to(REPO)) for path in _text_files()
                 if OUTSIDE_DATA in path.read_text(encoding="utf-8", errors="replace")]
    assert not offenders, f"point these at data/ (the repository's copy): {offenders}"


def _data_paths(node):
    """Every `path` / `test_path` string anywhere in a params file (data, curriculum sources)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("path", "test_path") and isinstance(value, str):
                yield value
            else:
                yield from _data_paths(value)
    elif isinstance(node, list):
        for item in node:
            yield from _data_paths(item)


@pytest.mark.parametrize("params", [REPO / "params.yaml", *sorted((REPO / "pipelines").glob("*/params.yaml"))],
                         ids=lambda path: str(path.relative_to(REPO)))
def test_every_configured_data_path_stays_inside_the_repository(params):
    # DVC runs each stage in the folder of its dvc.yaml, so relative paths start there.
    for value in _data_paths(yaml.safe_load(params.read_text())):
        resolved = (params.parent / value).resolve()
        assert resolved.is_relative_to(REPO.resolve()), f"{params}: {value} is outside the repository"
