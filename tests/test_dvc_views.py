"""What `dvc exp show`, `dvc metrics show` and `dvc plots show` display at the root, checked on the
files that decide it (dvc.yaml, the plot template, the committed headline), without running DVC."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from hackable_rl.core.storage import project_root
from hackable_rl.extensions import load_resolved
from hackable_rl.report.headline import HEADLINE_KEYS

REPO = Path(__file__).resolve().parents[1]
ROOT_DVC = yaml.safe_load((REPO / "dvc.yaml").read_text())
STUDIES = sorted(path.parent for path in (REPO / "pipelines").glob("*/dvc.yaml"))
TEMPLATE = REPO / ".dvc" / "plots" / "smoothed_series.json"


def _declared(stage: dict, kind: str) -> list[str]:
    return [next(iter(item)) if isinstance(item, dict) else item for item in stage.get(kind) or []]


def test_the_root_declares_one_metric_the_headline():
    """Every key of every declared metric becomes a `dvc exp show` column and a `dvc metrics show` cell."""
    metrics = {name: _declared(stage, "metrics") for name, stage in ROOT_DVC["stages"].items()}
    assert {name: files for name, files in metrics.items() if files} == {"report": ["metrics/headline.json"]}
    assert "metrics" not in ROOT_DVC and "params" not in ROOT_DVC  # no top-level files pulled into the table


def test_the_report_stage_writes_the_headline_it_declares():
    report = ROOT_DVC["stages"]["report"]
    assert "--headline metrics/headline.json" in report["cmd"]
    assert {"method", "corruption.channel", "corruption.rate"} <= set(report["params"])
    prompts = {f"metrics/{policy}/s{seed}/prompts.jsonl" for policy in ("base", "clean", "trained") for seed in (0, 1, 2)}
    assert prompts <= set(report["deps"])  # the CIs are bootstrapped from the per-prompt results


def test_committed_headline_has_the_keys_and_the_condition_of_params_yaml():
    headline = json.loads((REPO / "metrics" / "headline.json").read_text())
    cfg = load_resolved(REPO / "params.yaml")
    assert tuple(headline) == HEADLINE_KEYS
    assert headline["condition"] == f"{cfg.method}-{cfg.corruption.channel}-r{cfg.corruption.rate:g}"
    assert headline["ci_low"] <= headline["pass@1"] <= headline["ci_high"]
    assert all(0 <= headline[key] <= 1 for key in ("pass@1", "ci_low", "ci_high", "clean"))


def test_readme_exp_show_keeps_every_headline_column():
    """`dvc exp show --keep` matches column names from their start: the README command must keep
    each headline key (and nothing of params.yaml, whose keys would widen the table)."""
    readme = (REPO / "README.md").read_text()
    keep = re.search(r"dvc exp show --no-pager --drop '\.\*' --keep '([^']+)'", readme)
    assert keep, "README: the `dvc exp show --no-pager --drop '.*' --keep '...'` command"
    pattern = re.compile(keep.group(1))
    assert all(pattern.match(key) for key in ("Experiment", "Created", *HEADLINE_KEYS))
    params = load_resolved(REPO / "params.yaml").model_dump()
    assert not [key for key in params if pattern.match(key)]
    assert f"HEADLINE_COLUMNS := {keep.group(1)}\n" in (REPO / "Makefile").read_text()  # `make results`


@pytest.mark.parametrize("folder", [REPO, *STUDIES], ids=lambda path: path.name)
def test_plots_have_titles_axis_labels_and_the_series_template(folder):
    """No stage declares `plots:` (DVC would chart a CSV's last column on its own, flat ones included);
    each top-level plot is drawn through the one template, found from the project's folder."""
    pipeline = yaml.safe_load((folder / "dvc.yaml").read_text())
    assert not [name for name, stage in pipeline["stages"].items() if stage.get("plots")]
    for plot in pipeline.get("plots", []):
        (name, spec), = plot.items()
        template = folder / ".dvc" / "plots" / f"{spec['template']}.json"
        assert (template if template.exists() else (folder / spec["template"])).resolve() == TEMPLATE, name
        assert spec["title"] and spec["x_label"] and spec["y_label"], name
        assert spec["x"] == "step" and spec["y"], name


def test_template_colours_each_series_and_smooths_it():
    text = TEMPLATE.read_text()
    template = json.loads(text)
    for anchor in ("DATA", "X", "Y", "TITLE", "X_LABEL", "Y_LABEL"):
        assert f"<DVC_METRIC_{anchor}>" in text, anchor  # DVC fills these; a missing one is left literal
    assert template["encoding"]["color"]["field"] == "series"  # not `rev`: one colour per line
    assert "datum.filename" in template["transform"][0]["calculate"]
    loess = template["layer"][1]["transform"][0]
    assert loess["groupby"] == ["series"] and loess["bandwidth"] == {"signal": "smoothing"}


def test_dvc_plots_output_is_git_ignored():
    assert "dvc_plots/" in (REPO / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("study", STUDIES, ids=lambda path: path.name)
def test_every_study_is_its_own_dvc_project_on_the_shared_cache(study):
    """A `.dvc` folder makes the study a DVC project of its own (`dvc init --subdir`): the root's
    `dvc exp show`, `metrics show` and `params diff` stop at it. Its cache is the root's."""
    config = (study / ".dvc" / "config").read_text()
    cache = re.search(r"^\s*dir\s*=\s*(\S+)", config, re.MULTILINE)
    assert cache and (study / ".dvc" / cache.group(1)).resolve() == (REPO / ".dvc" / "cache").resolve()
    assert "/tmp" in (study / ".dvc" / ".gitignore").read_text().splitlines()


def test_a_study_temp_workspace_maps_back_to_the_study_folder(tmp_path):
    """`dvc exp run --temp` in a study copies the repository under the study's own `.dvc/tmp/exps`:
    the MLflow store is then the study's, as for `dvc repro` in its folder."""
    study = tmp_path / "repo" / "pipelines" / "smollm2_gsm8k"
    temp = study / ".dvc" / "tmp" / "exps" / "standalone" / "tmpab12" / "pipelines" / "smollm2_gsm8k"
    temp.mkdir(parents=True)
    assert project_root(temp) == project_root(study) == study


def test_the_plots_page_carries_its_own_vega_and_loads_nothing_from_a_network():
    """`dvc plots show` fills .dvc/plots_page.html (.dvc/config); DVC's own page loads Vega from a CDN."""
    config = (REPO / ".dvc" / "config").read_text()
    assert re.search(r"^\[plots\]\n\s+html_template = plots_page.html$", config, re.M), config
    page = (REPO / ".dvc" / "plots_page.html").read_text()
    assert "{plot_divs}" in page and "{scripts}" not in page  # no place for DVC's CDN script tags
    assert not re.search(r"<script[^>]+src=", page)
    # the three libraries each plot's inline vegaEmbed(...) call needs, at the versions dvc-render asks for
    for defined in ('.vega={}', '.vegaLite={}', "vegaEmbed", '"5.20.2"', '"5.2.0"', '"6.18.2"'):
        assert defined in page, defined
