"""The bad-input classes reliability 4 named, each as a property over the class (Hypothesis), through the
real CLI or loader: an integer too long for Python to read, an empty path that would mean "here", a path
that is not a regular file, an output inside a folder its command reads, and a completion budget past the
policy's context. Each is refused in one line naming the file, line, field or option, and nothing
already written changes. Seeded (`derandomize`) as the other property tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.config.loading import load_config
from hackable_rl.core.errors import ConfigError
from hackable_rl.evaluation.prompt_results import PromptResult, write_prompt_results

PROFILE = settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "6")), derandomize=True, deadline=20000,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
INTEGER_KEYS = ("seed", "trainer.max_steps", "data.train_size", "evaluation.n")


def _nested(key: str, value: str) -> str:
    *parents, leaf = key.split(".")
    text, indent = "", ""
    for part in parents:
        text += f"{indent}{part}:\n"
        indent += "  "
    return text + f"{indent}{leaf}: {value}\n"


@PROFILE
@given(digits=st.integers(min_value=4301, max_value=6000), key=st.sampled_from(INTEGER_KEYS),
       sign=st.sampled_from(["", "-", "+"]), through_set=st.booleans())
def test_an_integer_too_long_to_read_is_one_line_naming_where(tmp_path_factory, digits, key, sign, through_set) -> None:
    folder = tmp_path_factory.mktemp("long")
    number = sign + "7" * digits
    params = folder / "params.yaml"
    params.write_text("tracking: {enabled: false}\n" + ("" if through_set else _nested(key, number)))
    with pytest.raises(ConfigError) as caught:
        load_config(params, [f"{key}={number}"] if through_set else [])
    where = f"--set {key}" if through_set else f"{params}:{2 + key.count('.')}"
    assert caught.value.problems == [f"{where}: an integer of {digits} digits is too long to read; no setting takes one"]


@PROFILE
@given(field=st.sampled_from(["storage.cache_dir", "storage.runs_dir"]),
       blank=st.text(alphabet=" \t", max_size=4))
def test_an_empty_storage_folder_is_refused_naming_the_field(tmp_path_factory, field, blank) -> None:
    folder = tmp_path_factory.mktemp("blank")
    params = folder / "params.yaml"
    params.write_text("tracking: {enabled: false}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(params, [f"{field}='{blank}'"])
    assert caught.value.problems == [f"{field}: is empty, which would mean the current folder; name a folder "
                                     "(`.` if that is meant)"]


@PROFILE
@given(kind=st.sampled_from(["missing", "folder", "fifo"]), name=st.from_regex(r"[a-z]{1,8}", fullmatch=True))
def test_a_data_path_that_is_not_a_file_says_what_it_is(tmp_path_factory, kind, name) -> None:
    folder = tmp_path_factory.mktemp("kinds")
    path = folder / name
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    result = CliRunner().invoke(app, ["prepare", "--set", "tracking.enabled=false", "--set", "data.provider=jsonl",
                                      "--set", f"data.path={path}", "--set", f"storage.cache_dir={folder / 'cache'}"])
    said = {"missing": "does not exist", "folder": "is a folder, not a file",
            "fifo": "is a FIFO (named pipe), not a regular file"}[kind]
    assert result.exit_code == 2 and f"data.path: {path} {said}" in result.output
    assert "Traceback" not in result.output and not (folder / "cache").exists()


@PROFILE
@given(depth=st.integers(min_value=0, max_value=3), name=st.sampled_from(["prompts.jsonl", "eval.json", "new.json"]))
def test_an_output_inside_a_folder_compare_reads_is_refused_and_changes_nothing(tmp_path_factory, depth, name) -> None:
    folder = tmp_path_factory.mktemp("inputs") / "policy"
    write_prompt_results(folder / "prompts.jsonl", [PromptResult("p0", 4, 2, True, None, None)])
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    out = folder.joinpath(*[f"d{level}" for level in range(depth)], name)
    result = CliRunner().invoke(app, ["compare", "--policy", f"a={folder}", "--policy", f"b={folder}",
                                      "--pair", "a:b", "--out", str(out)])
    assert result.exit_code == 2 and f"inside policy a's folder {folder}, which compare reads" in result.output
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before


@PROFILE
@given(context=st.integers(min_value=8, max_value=4096), extra=st.integers(min_value=0, max_value=10**9))
def test_a_completion_budget_past_the_tiny_policys_context_is_refused_with_its_limit(
        tmp_path_factory, context, extra) -> None:
    folder = tmp_path_factory.mktemp("context")
    params = folder / "params.yaml"
    params.write_text("tracking: {enabled: false}\n")
    tokens = context + extra
    with pytest.raises(ConfigError) as caught:
        load_config(params, [f"model.tiny.max_position_embeddings={context}", f"generation.max_new_tokens={tokens}"])
    assert any(f"generation.max_new_tokens: {tokens} does not fit the tiny policy's context of {context} positions"
               in problem for problem in caught.value.problems)


def test_a_warm_start_gone_from_the_cache_names_the_stage_to_rerun(project: Path) -> None:
    """A DVC cache without a stage's output (here the warm start): the next command names the stage that
    makes it, not a traceback from inside loading."""
    import shutil

    from hackable_rl.models.sources import policy_dir

    config = load_config("params.yaml", ["tracking.enabled=false"])
    shutil.rmtree(policy_dir(config))
    for command in (["eval", "--base"], ["train"]):
        result = CliRunner().invoke(app, [*command, "--set", "tracking.enabled=false", "--set", "trainer.max_steps=2",
                                          "--set", "trainer.permanent_steps=[]"])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert f"no warm-started model in {policy_dir(config)}; run `hackable-rl prepare` then `hackable-rl warmstart`" \
            in result.output
