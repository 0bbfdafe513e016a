"""A corpus of bad inputs run through the real CLI: every user mistake is one line on stderr, exit
code 2 and no traceback, and the line names the file, line, field or option at fault.

Each case is a command line run in a workspace folder that holds the bad files (built once per
module). A case passes when the command exits 2, nothing prints "Traceback", stderr has exactly
one `error:` line, and that line contains the case's `names` text. The cases stop before any
model trains: the slowest ones import transformers to reject a corrupt model folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app

TRACKING_OFF = "storage: {cache_dir: cache}\ntracking: {enabled: false}\n"
GOOD_ROW = json.dumps({"completion": "<think>a</think> \\boxed{1}", "reference": "1"}) + "\n"
DEEP = "[" * 200_000 + "]" * 200_000  # 200k levels: far past the interpreter's recursion limit
BOMB = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]\n" for level in range(1, 9)
)  # anchors 9 deep, 10 aliases each: 10**9 values once expanded

FILES: dict[str, str | bytes] = {
    # params files
    "plain.yaml": TRACKING_OFF,
    "tracked.yaml": "storage: {cache_dir: cache}\n",
    "latin1.yaml": "seed: 0\n# caf\xe9 au lait\n".encode("latin-1"),
    "empty.yaml": "",
    "comments.yaml": "# every key commented out\n# seed: 0\n",
    "dup_top.yaml": "seed: 1\nmethod: baseline\nseed: 2\n",
    "dup_nested.yaml": "trainer:\n  max_steps: 3\n  max_steps: 4\n",
    "dup_in_list.yaml": "verifier:\n  members:\n    - name: a\n      name: b\n",
    "bomb.yaml": BOMB,
    "self_alias.yaml": "seed: &loop [*loop]\n",
    "deep.yaml": "seed: " + "[" * 50_000 + "]" * 50_000 + "\n",
    "nul.yaml": b"seed: 0\nmethod: base\x00line\n",
    "list.yaml": "- seed: 0\n",
    "python_tag.yaml": "seed: !!python/object/apply:os.system ['true']\n",
    "syntax.yaml": "seed: [1, 2\n",
    "nan_missing.yaml": "trainer:\n  missing_reward_value: .nan\n",
    "inf_lambda.yaml": "method: robust\nmethod_kwargs:\n  disagreement_lambda: .inf\n",
    "neg_inf_weight.yaml": "objective:\n  correctness_weight: -.inf\n",
    "nan_length.yaml": "objective:\n  length_penalty_lambda: .NaN\n",
    "nan_penalty.yaml": "objective:\n  non_strict_penalty: .nan\n",
    "nan_rate.yaml": "corruption:\n  rate: .nan\n",
    "inf_beta.yaml": "trainer:\n  beta: .inf\n",
    # judge inputs
    "good.jsonl": GOOD_ROW,
    "latin1.jsonl": GOOD_ROW.encode() + '{"completion": "caf\xe9", "reference": "1"}\n'.encode("latin-1"),
    "nan_reference.jsonl": '{"completion": "<think>a</think> \\\\boxed{1}", "reference": NaN}\n',
    "inf_completion.jsonl": '{"completion": Infinity, "reference": "1"}\n',
    "neg_inf_extra.jsonl": GOOD_ROW + '{"completion": "a", "reference": "1", "score": -Infinity}\n',
    "deep.jsonl": '{"completion": "a", "reference": "1", "x": ' + DEEP + "}\n",
    "array_row.jsonl": '["a", "1"]\n',
    "broken.jsonl": '{"completion": "a", "reference": \n',
    "no_completion.jsonl": '{"text": "a", "reference": "1"}\n',
    # data.path inputs
    "latin1_data.jsonl": '{"question": "caf\xe9?", "answer": "#### 1"}\n'.encode("latin-1"),
    "nan_data.jsonl": '{"question": "How many?", "answer": NaN}\n',
    "deep_data.jsonl": '{"question": ' + DEEP + ', "answer": "#### 1"}\n',
    "gsm8k.yaml": TRACKING_OFF + "data: {name: g, provider: gsm8k, sft_size: 0}\n",
    # plugins (the folder is put on sys.path)
    "plugins/wrong_plugin.py": (
        "def provider(config):\n    return None\n\n\n"
        "def reward(completions):\n    return [0.0 for _ in completions]\n\n\n"
        "class NotAnObjective:\n    def __init__(self):\n        pass\n"
    ),
    "plugins/broken_plugin.py": "def provider(config, seed)\n    return None\n",
    # model folders (eval --model) and the params that evaluates them
    "arith.yaml": TRACKING_OFF + "data: {name: a, train_size: 8, sft_size: 0}\n",
    "garbage_model/config.json": json.dumps(
        {"model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 300}
    ),
    "garbage_model/model.safetensors": b"not a safetensors file" * 50,
    "bad_config_model/config.json": b"{not json",
    "pickle_adapter/adapter_config.json": json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": "garbage_model", "r": 2, "lora_alpha": 4,
         "target_modules": ["q_proj"], "task_type": "CAUSAL_LM"}
    ),
    "broken_adapter/adapter_config.json": "{peft_type: LORA",
    "latin1_adapter/adapter_config.json": '{"peft_type": "LOR\xc0"}'.encode("latin-1"),
    # report / study inputs
    "latin1_metrics/warmstart.json": '{"pass_at_1": 0.5, "note": "caf\xe9"}'.encode("latin-1"),
    "nan_metrics/warmstart.json": '{"pass_at_1": NaN}',
    "latin1_study.yaml": "method_overrides:\n  robust: ['seed=1']  # caf\xe9\n".encode("latin-1"),
    "dup_study.yaml": "method_overrides:\n  robust: ['seed=1']\n  robust: ['seed=2']\n",
    "a_file": "this is a file, not a folder\n",
}
FOLDERS = ["a_folder", "run_folder"]


def _write_adapter_pickle(folder: Path) -> None:
    """A PEFT adapter saved as a pickle that `weights_only` refuses (an arbitrary class inside)."""
    import argparse

    import torch

    torch.save({"base_model.model.q_proj.lora_A.weight": argparse.Namespace()}, folder / "adapter_model.bin")


@dataclass(frozen=True)
class Case:
    id: str
    args: list[str]
    names: str
    """Text the one error line must contain: the file (with its line), the field or the option."""
    env: dict[str, str] = field(default_factory=dict)


def case(id: str, args: str, names: str, **env: str) -> Case:
    return Case(id, args.split(), names, env)


FOREIGN_URI = {"MLFLOW_TRACKING_URI": "foo://bar"}

pytestmark = pytest.mark.usefixtures("fresh_logging")

CASES = [
    # ---- params files: encoding, folders, emptiness, duplicates, alias bombs, YAML syntax
    case("params-not-utf8", "validate -c latin1.yaml", "latin1.yaml:2: not UTF-8"),
    case("params-not-utf8-train", "train -c latin1.yaml", "latin1.yaml:2: not UTF-8"),
    case("params-not-utf8-prepare", "prepare -c latin1.yaml", "latin1.yaml:2: not UTF-8"),
    case("params-is-a-folder", "validate -c a_folder", "a_folder: is a folder"),
    case("params-missing", "validate -c missing.yaml", "missing.yaml: no such config file"),
    case("params-empty", "validate -c empty.yaml", "empty.yaml: is empty"),
    case("params-empty-train", "train -c empty.yaml", "empty.yaml: is empty"),
    case("params-only-comments", "validate -c comments.yaml", "comments.yaml: is empty"),
    case("duplicate-top-level-key", "validate -c dup_top.yaml", "dup_top.yaml:3: duplicate key 'seed'"),
    case("duplicate-nested-key", "validate -c dup_nested.yaml",
         "dup_nested.yaml:3: duplicate key 'max_steps'"),
    case("duplicate-key-in-list-item", "validate -c dup_in_list.yaml",
         "dup_in_list.yaml:4: duplicate key 'name'"),
    case("alias-bomb", "validate -c bomb.yaml", "bomb.yaml:1: aliases expand to more than"),
    case("alias-bomb-train", "train -c bomb.yaml", "bomb.yaml:1: aliases expand to more than"),
    case("self-referencing-alias", "validate -c self_alias.yaml", "self_alias.yaml:1: an alias refers"),
    case("yaml-nested-too-deeply", "validate -c deep.yaml", "deep.yaml: not valid YAML (nested too deeply)"),
    case("yaml-nul-character", "validate -c nul.yaml", "nul.yaml:2: not valid YAML (character #x00"),
    case("params-top-level-list", "validate -c list.yaml", "list.yaml: expected a mapping"),
    case("params-python-tag", "validate -c python_tag.yaml", "python_tag.yaml:1: not valid YAML"),
    case("params-syntax-error", "validate -c syntax.yaml", "syntax.yaml:2: not valid YAML"),
    case("set-without-equals", "validate -c plain.yaml --set seed", "--set 'seed'"),
    # ---- NaN and Infinity in YAML: refused by config validation, in the file and in --set
    case("yaml-nan-missing-reward", "validate -c nan_missing.yaml", "trainer.missing_reward_value: got nan"),
    case("yaml-inf-disagreement-lambda", "validate -c inf_lambda.yaml",
         "method_kwargs.disagreement_lambda: got inf"),
    case("yaml-neg-inf-weight", "validate -c neg_inf_weight.yaml", "objective.correctness_weight: got -inf"),
    case("yaml-nan-length-lambda", "validate -c nan_length.yaml", "objective.length_penalty_lambda: got nan"),
    case("yaml-nan-penalty", "validate -c nan_penalty.yaml", "objective.non_strict_penalty: got nan"),
    case("yaml-nan-probability", "validate -c nan_rate.yaml", "corruption.rate: got nan"),
    case("yaml-inf-beta", "validate -c inf_beta.yaml", "trainer.beta: got inf"),
    case("set-nan-missing-reward", "validate -c plain.yaml --set trainer.missing_reward_value=.nan",
         "trainer.missing_reward_value: got nan"),
    case("set-inf-attenuation-k", "validate -c plain.yaml --set method=robust --set method_kwargs.attenuation_k=.inf",
         "method_kwargs.attenuation_k: got inf"),
    case("set-nan-fp-scale",
         "train -c plain.yaml --set corruption.channel=asymmetric --set corruption.kwargs.fp_scale=.nan",
         "corruption.kwargs.fp_scale: got nan"),
    # ---- inf/-inf/NaN in every numeric channel setting (a clean-named run that pays every wrong answer)
    case("set-inf-fp-scale-at-rate-0",
         "validate -c plain.yaml --set corruption.channel=asymmetric --set corruption.rate=0"
         " --set corruption.kwargs.fp_scale=inf", "corruption.kwargs.fp_scale: got 'inf'; expected a finite number"),
    *[
        case(f"set-{value.strip('.')}-{channel}-{setting}",
             f"validate -c plain.yaml --set corruption.channel={channel} --set corruption.kwargs.{setting}={value}",
             f"corruption.kwargs.{setting}: got {float(value.replace('.', ''))!r}; expected a finite number")
        for channel, setting in [("asymmetric", "fp_scale"), ("asymmetric", "fn_scale"), ("bias", "fp_scale"),
                                 ("bias", "fn_scale"), ("confidence", "confidence_floor")]
        for value in [".inf", "-.inf", ".nan"]
    ],
    case("set-nan-disagreement-lambda", "validate -c plain.yaml --set method=robust --set method_kwargs.disagreement_lambda=.nan",
         "method_kwargs.disagreement_lambda: got nan"),
    case("set-neg-inf-beta", "validate -c plain.yaml --set trainer.beta=-.inf", "trainer.beta: got -inf"),
    case("set-inf-learning-rate", "validate -c plain.yaml --set trainer.learning_rate=.inf",
         "trainer.learning_rate: got inf"),
    case("set-nan-temperature", "validate -c plain.yaml --set generation.temperature=.nan",
         "generation.temperature: got nan"),
    case("channel-setting-unknown",
         "train -c plain.yaml --set corruption.channel=asymmetric --set corruption.kwargs.fp_scal=2",
         "corruption.kwargs.fp_scal: unknown setting (did you mean fp_scale?"),
    case("checker-unknown-name", 'train -c plain.yaml --set verifier.members=[{"name":"m0","checker":"any_boxx"}]',
         "verifier.members[0].checker: unknown checker 'any_boxx' (did you mean 'any_box'?)"),
    # ---- judge: input and output files, NaN/Infinity and nesting in rows, option ranges
    case("judge-input-not-utf8", "judge -i latin1.jsonl -o out.jsonl", "latin1.jsonl:2: not UTF-8"),
    case("judge-input-is-a-folder", "judge -i a_folder -o out.jsonl", "a_folder: is a folder"),
    case("judge-input-missing", "judge -i missing.jsonl -o out.jsonl", "missing.jsonl: no such file"),
    case("judge-output-is-a-folder", "judge -i good.jsonl -o a_folder", "--output a_folder: is a folder"),
    case("judge-output-under-a-file", "judge -i good.jsonl -o a_file/out.jsonl", "--output a_file/out.jsonl"),
    case("judge-nan-reference", "judge -i nan_reference.jsonl -o out.jsonl",
         "nan_reference.jsonl:1: not valid JSON (NaN"),
    case("judge-infinity-completion", "judge -i inf_completion.jsonl -o out.jsonl",
         "inf_completion.jsonl:1: not valid JSON (Infinity"),
    case("judge-neg-infinity-extra-field", "judge -i neg_inf_extra.jsonl -o out.jsonl",
         "neg_inf_extra.jsonl:2: not valid JSON (-Infinity"),
    case("judge-row-nested-200k-deep", "judge -i deep.jsonl -o out.jsonl",
         "deep.jsonl:1: not valid JSON (nested too deeply"),
    case("judge-row-not-an-object", "judge -i array_row.jsonl -o out.jsonl",
         "array_row.jsonl:1: expected a JSON object"),
    case("judge-row-malformed", "judge -i broken.jsonl -o out.jsonl", "broken.jsonl:1: not valid JSON"),
    case("judge-missing-field", "judge -i no_completion.jsonl -o out.jsonl",
         "no_completion.jsonl:1: missing field"),
    case("judge-rel-tol-negative", "judge -i good.jsonl -o out.jsonl --rel-tol -1",
         "--rel-tol: -1 is not in"),
    case("judge-rel-tol-nan", "judge -i good.jsonl -o out.jsonl --rel-tol nan", "--rel-tol: nan is not in"),
    case("judge-rel-tol-above-one", "judge -i good.jsonl -o out.jsonl --rel-tol 2", "--rel-tol: 2 is not in"),
    case("judge-timeout-negative", "judge -i good.jsonl -o out.jsonl --timeout-s -1",
         "--timeout-s: -1 is not in"),
    case("judge-timeout-zero", "judge -i good.jsonl -o out.jsonl --timeout-s 0", "--timeout-s: 0 is not in"),
    case("judge-timeout-infinite", "judge -i good.jsonl -o out.jsonl --timeout-s inf",
         "--timeout-s: inf is not in"),
    case("judge-unknown-extract", "judge -i good.jsonl -o out.jsonl --extract nearest", "--extract"),
    # ---- data.path: encoding, folders, NaN and nesting in rows
    case("data-path-not-utf8", "prepare -c gsm8k.yaml --set data.path=latin1_data.jsonl",
         "latin1_data.jsonl:1: not UTF-8"),
    case("data-path-is-a-folder", "prepare -c gsm8k.yaml --set data.path=a_folder", "data.path: a_folder"),
    case("data-path-missing", "prepare -c gsm8k.yaml --set data.path=missing.jsonl",
         "data.path: missing.jsonl"),
    case("data-path-nan-row", "prepare -c gsm8k.yaml --set data.path=nan_data.jsonl",
         "nan_data.jsonl:1: not valid JSON (NaN"),
    case("data-path-row-nested-200k-deep", "prepare -c gsm8k.yaml --set data.path=deep_data.jsonl",
         "deep_data.jsonl:1: not valid JSON (nested too deeply"),
    # ---- plugins that do not load or resolve to the wrong kind of object
    case("provider-os-system", "prepare -c plain.yaml --set data.provider=os:system",
         "data.provider: data provider 'os:system'"),
    case("provider-not-callable", "prepare -c plain.yaml --set data.provider=os:sep",
         "data.provider: data provider 'os:sep'"),
    case("provider-wrong-builtin", "prepare -c plain.yaml --set data.provider=builtins:len",
         "data.provider: data provider 'builtins:len'"),
    case("provider-wrong-signature", "prepare -c plain.yaml --set data.provider=wrong_plugin:provider",
         "data.provider: data provider 'wrong_plugin:provider'"),
    case("provider-syntax-error", "prepare -c plain.yaml --set data.provider=broken_plugin:provider",
         "broken_plugin.py:1"),
    case("provider-relative-module", "prepare -c plain.yaml --set data.provider=..parent:provider",
         "data.provider: '..parent:provider': expected 'package.module:attr'"),
    case("provider-missing-module", "prepare -c plain.yaml --set data.provider=no_such_module:provider",
         "data.provider: 'no_such_module:provider': cannot import"),
    case("provider-missing-attribute", "prepare -c plain.yaml --set data.provider=os:no_such_provider",
         "data.provider: 'os:no_such_provider': module 'os' has no attribute"),
    case("provider-unknown-name", "prepare -c plain.yaml --set data.provider=gsm9k",
         "data.provider: unknown data provider 'gsm9k'"),
    case("reward-not-callable", "train -c plain.yaml --set objective.rewards=[format_tag_reward,os:sep]",
         "objective.rewards[1]: reward 'os:sep'"),
    case("reward-wrong-builtin", "train -c plain.yaml --set objective.rewards=[math:sqrt]",
         "objective.rewards[0]: reward 'math:sqrt'"),
    case("reward-without-columns", "train -c plain.yaml --set objective.rewards=[wrong_plugin:reward]",
         "objective.rewards[0]: reward 'wrong_plugin:reward'"),
    case("reward-unknown-name", "train -c plain.yaml --set objective.rewards=[shouting]",
         "objective.rewards[0]: unknown reward 'shouting'"),
    case("objective-not-a-class", "train -c plain.yaml --set objective.class_path=os:sep",
         "objective.class_path: objective 'os:sep'"),
    case("objective-a-function", "train -c plain.yaml --set objective.class_path=os:system",
         "objective.class_path: objective 'os:system'"),
    case("objective-wrong-constructor", "train -c plain.yaml --set objective.class_path=wrong_plugin:NotAnObjective",
         "objective.class_path: objective 'wrong_plugin:NotAnObjective'"),
    case("objective-unknown-name", "train -c plain.yaml --set objective.name=nope",
         "objective.name: unknown objective 'nope'"),
    # ---- output paths: a file where a folder goes, a folder where a file goes
    case("train-metrics-dir-is-a-file", "train -c plain.yaml --metrics-dir a_file",
         "--metrics-dir a_file: is a file"),
    case("eval-metrics-dir-is-a-file", "eval --base -c plain.yaml --metrics-dir a_file",
         "--metrics-dir a_file: is a file"),
    case("eval-out-dir-is-a-file", "eval --base -c plain.yaml --out-dir a_file",
         "--out-dir a_file: is a file"),
    case("eval-out-dir-under-a-file", "eval --base -c plain.yaml --out-dir a_file/eval",
         "--out-dir a_file/eval"),
    case("condition-out-is-a-file", "condition --method base -c plain.yaml --out a_file",
         "--out a_file: is a file"),
    case("report-out-is-a-file", "report --single -c plain.yaml --out a_file", "--out a_file: is a file"),
    # ---- report and study inputs
    case("report-metrics-not-utf8", "report --single -c plain.yaml --metrics-dir latin1_metrics --out report",
         "latin1_metrics/warmstart.json:1: not UTF-8"),
    case("report-metrics-nan", "report --single -c plain.yaml --metrics-dir nan_metrics --out report",
         "nan_metrics/warmstart.json:1: not valid JSON (NaN"),
    case("study-file-not-utf8", "condition --method robust --study latin1_study.yaml -c plain.yaml --out cond",
         "latin1_study.yaml:2: not UTF-8"),
    case("study-file-duplicate-key", "condition --method robust --study dup_study.yaml -c plain.yaml --out cond",
         "dup_study.yaml:3: duplicate key 'robust'"),
    case("study-file-is-a-folder", "condition --method robust --study a_folder -c plain.yaml --out cond",
         "a_folder: is a folder"),
    # ---- unreadable or unsafe model files (eval --model; the data is prepared, the load fails)
    case("model-garbage-safetensors", "eval --model garbage_model -c arith.yaml",
         "garbage_model: no loadable model"),
    case("model-config-not-json", "eval --model bad_config_model -c arith.yaml",
         "bad_config_model: no loadable model"),
    case("model-is-a-file", "eval --model a_file -c arith.yaml", "a_file: no such model folder"),
    case("adapter-pickle-bin", "eval --model pickle_adapter -c arith.yaml",
         "pickle_adapter: no adapter_model.safetensors"),
    case("adapter-config-not-json", "eval --model broken_adapter -c arith.yaml",
         "broken_adapter/adapter_config.json:1: not valid JSON"),
    case("adapter-config-not-utf8", "eval --model latin1_adapter -c arith.yaml",
         "latin1_adapter/adapter_config.json:1: not UTF-8"),
    # ---- tracking URIs with a scheme MLflow has no store for
    case("uri-promote", "promote --run-id 0123abcd -c tracked.yaml",
         "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-eval-run-id", "eval --run-id 0123abcd -c tracked.yaml",
         "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-eval-base", "eval --base -c tracked.yaml", "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-sync", "sync run_folder -c tracked.yaml", "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-train", "train -c tracked.yaml", "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-warmstart", "warmstart -c tracked.yaml", "MLFLOW_TRACKING_URI: 'foo://bar'", **FOREIGN_URI),
    case("uri-ftp", "promote --run-id 0123abcd -c tracked.yaml", "MLFLOW_TRACKING_URI: 'ftp://host/store'",
         MLFLOW_TRACKING_URI="ftp://host/store"),
]


def write_corpus(folder: Path, files: dict[str, str | bytes], folders: list[str]) -> Path:
    """Writes each file of a corpus (text as UTF-8, bytes as they are) and makes its empty folders."""
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content, encoding="utf-8")
    for name in folders:
        (folder / name).mkdir()
    return folder


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A folder holding every bad file of the corpus, with a prepared arith dataset (so that
    `eval --model` gets as far as loading the model)."""
    folder = write_corpus(tmp_path_factory.mktemp("bad-inputs"), FILES, FOLDERS)
    _write_adapter_pickle(folder / "pickle_adapter")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        prepared = CliRunner().invoke(app, ["prepare", "-c", "arith.yaml"])
    finally:
        os.chdir(previous)
    assert prepared.exit_code == 0, prepared.output
    return folder


def test_corpus_is_large_enough():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_exit_2(bad: Case, workspace: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(workspace)
    monkeypatch.syspath_prepend(str(workspace / "plugins"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert_refused_in_one_line(CliRunner().invoke(app, bad.args, env=bad.env or None), bad)


def assert_refused_in_one_line(result, bad: Case) -> None:
    """Exit 2, no traceback, and exactly one `error:` line that names what `bad` says it must."""
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert bad.names in errors[0], errors[0]


def _cli(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    command = [sys.executable, "-m", "hackable_rl", *args]
    return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def test_a_real_process_prints_exactly_one_line(workspace: Path):
    result = _cli(workspace, "validate", "-c", "dup_nested.yaml")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: dup_nested.yaml:3: duplicate key 'max_steps' (first given on line 2); "
        "YAML would keep only the last value"
    ]


def test_debug_shows_the_traceback(workspace: Path):
    result = _cli(workspace, "--debug", "judge", "-i", "nan_reference.jsonl", "-o", "out.jsonl")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "UserError: nan_reference.jsonl:1: not valid JSON (NaN" in result.stderr
