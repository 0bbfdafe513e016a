"""A second corpus of bad inputs, run through the real CLI like `test_bad_inputs.py` (same rules: exit
2, no traceback, exactly one `error:` line that names the file, line, field or option): YAML 1.1
surprises, seeds, names MLflow refuses, numbers and keys in JSON rows, empty inputs, outputs that
must not be replaced, over-long file names, stores and URIs, ports, aliases and run ids, run folders
and checkpoints edited or damaged by hand, event logs, and model folders that do not fit together.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from test_bad_inputs import TRACKING_OFF, Case, assert_refused_in_one_line, case, write_corpus

LONG_NAME = "n" * 300  # past the 255-byte limit of a file name
DIGITS = "1" * 5000  # past Python's 4,300-digit limit for reading an integer
TINY_SHAPE = ("model: {tiny: {hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, "
              "vocab_size: 300}}\n")
ARITH = "data: {name: a, train_size: 8, test_size: 4, validation_size: 4, sft_size: 0}\n"
RUN_INFO = {"created_by": "hackable-rl", "kind": "train", "status": "running"}

FILES: dict[str, str | bytes] = {
    # params files
    "plain.yaml": TRACKING_OFF,
    "number_completion.jsonl": json.dumps({"completion": 123, "reference": "123"}) + "\n",
    "no_marker_data.jsonl": json.dumps({"question": "Ann has 2 pens and buys 3. How many?",
                                        "answer": "Ann has 2 + 3 = 5 pens."}) + "\n",
    "merge_twice.yaml": TRACKING_OFF + "trainer:\n  <<: {max_steps: 5}\n  max_steps: 7\n",
    "tracked.yaml": "storage: {cache_dir: cache}\n",
    "arith.yaml": TRACKING_OFF + ARITH,
    "tinyshape.yaml": TRACKING_OFF + ARITH + TINY_SHAPE,
    "octal.yaml": TRACKING_OFF + "seed: 010\n",
    "long_seed.yaml": TRACKING_OFF + "seed: " + DIGITS + "\n",
    "octal_nested.yaml": TRACKING_OFF + "trainer:\n  save_steps: 0100\n",
    "sexagesimal.yaml": TRACKING_OFF + "seed: 1:30\n",
    "bool_key.yaml": TRACKING_OFF + "on: 1\n",
    "bool_key_nested.yaml": "tracking:\n  enabled: false\n  yes: 1\n",
    "store_folder.yaml": "storage: {cache_dir: store_folder}\n",
    "store_text.yaml": "storage: {cache_dir: store_text}\n",
    "store_folder/mlflow/mlflow.db/keep": "",
    "store_text/mlflow/mlflow.db": "this is a text file, not a database\n",
    # judge inputs
    "good.jsonl": json.dumps({"completion": "<think>a</think> \\boxed{1}", "reference": "1"}) + "\n",
    "dup_key.jsonl": '{"completion": "a", "completion": "b", "reference": "1"}\n',
    "dup_key_nested.jsonl": '{"completion": "a", "reference": "1", "meta": {"x": 1, "x": 2}}\n',
    "long_number.jsonl": '{"completion": "a", "reference": ' + DIGITS + "}\n",
    "huge_float.jsonl": '{"completion": "a", "reference": 1e400}\n',
    "huge_negative.jsonl": '{"completion": "a", "reference": "1"}\n{"completion": "b", "reference": "1", "x": -1e400}\n',
    "empty.jsonl": "",
    "blank.jsonl": "\n\n  \n",
    # data.path inputs
    "gsm8k.yaml": TRACKING_OFF + "data: {name: g, provider: gsm8k, sft_size: 0}\n",
    "dup_key_data.jsonl": '{"question": "How many?", "question": "Really?", "answer": "#### 1"}\n',
    "huge_data.jsonl": '{"question": "How many?", "answer": 1e400}\n',
    "long_data.jsonl": '{"question": "How many?", "answer": ' + DIGITS + "}\n",
    "dup_ids.yaml": TRACKING_OFF + (
        "data: {name: d, provider: jsonl, path: dup_ids.jsonl, field_map: {id: n}, train_size: 4, test_size: 4,"
        " validation_size: 0, sft_size: 0}\n"
    ),
    "dup_ids.jsonl": "".join(
        json.dumps({"question": f"What is {n} plus {n}?", "answer": f"#### {2 * n}", "n": n % 7}) + "\n"
        for n in range(1, 13)
    ),
    # event logs and run.json files of run folders given to `sync`
    "sync_no_delivered/run.json": json.dumps(RUN_INFO),
    "sync_no_delivered/tracking-events.jsonl": '{"event": "params", "data": {}}\n',
    "sync_no_event/run.json": json.dumps(RUN_INFO),
    "sync_no_event/tracking-events.jsonl": '{"delivered": false, "data": {}}\n',
    "sync_dup_key/run.json": json.dumps(RUN_INFO),
    "sync_dup_key/tracking-events.jsonl": '{"event": "params", "delivered": false, "delivered": true}\n',
    "sync_run_json_list/run.json": "[]",
    "sync_run_json_list/tracking-events.jsonl": '{"event": "params", "delivered": false, "data": {}}\n',
    "a_file": "this is a file, not a folder\n",
}
FOLDERS = ["a_folder"]

# Run folders given to `train --resume auto` (tracking.run_name=<folder>): run.json fields a resume
# reads, edited by hand, and checkpoints damaged after they were written.
RUN_JSON_EDITS = {
    "final-step-string": {"final_step": "3"},
    "final-step-bool": {"final_step": True},
    "status-number": {"status": 3},
    "artifacts-list": {"checkpoint_artifacts": ["1"]},
    "run-id-number": {"mlflow_run_id": 7},
    "changes-object": {"config_changes": {}},
    "pending-string": {"tracking_pending": "yes"},
}


def _run_dir(workspace: Path, name: str) -> Path:
    return workspace / "cache" / "artifacts" / "runs" / name


def _make_run(workspace: Path, name: str, extra: dict | None = None) -> Path:
    """A run folder as a killed training leaves it: run.json (with `extra`) and the config.yaml of
    plain.yaml with this run name."""
    from hackable_rl.config.loading import load_config
    from hackable_rl.training.run_dir import create_run_dir

    config = load_config(workspace / "plain.yaml", [f"tracking.run_name={name}"])
    run_dir = _run_dir(workspace, name)
    info = create_run_dir(run_dir, config)
    (run_dir / "run.json").write_text(json.dumps({**info, **(extra or {})}))
    return run_dir


def _make_runs(workspace: Path) -> None:
    for name, extra in RUN_JSON_EDITS.items():
        _make_run(workspace, name, extra)
    (_make_run(workspace, "run-json-list") / "run.json").write_text("[]")
    (_make_run(workspace, "run-json-dup-key") / "run.json").write_text(
        '{"created_by": "hackable-rl", "status": "running", "status": "finished"}')
    (_make_run(workspace, "step-final") / "checkpoints" / "permanent" / "step-final").mkdir(parents=True)
    stray = _make_run(workspace, "stray-file") / "checkpoints" / "permanent"
    stray.mkdir(parents=True)
    (stray / "notes.txt").write_text("kept by hand\n")
    corrupt = _make_run(workspace, "corrupt-only") / "checkpoints" / "resume" / "checkpoint-2"
    corrupt.mkdir(parents=True)
    (corrupt / "trainer_state.json").write_text('{"global_step": 2}')
    (corrupt / "model.safetensors").write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00{")  # cut inside its header
    _make_run(workspace, "shape")
    empty_state = _make_run(workspace, "state-empty") / "checkpoints" / "resume" / "checkpoint-4"
    empty_state.mkdir(parents=True)
    (empty_state / "trainer_state.json").write_text("")


def _make_models(workspace: Path) -> None:
    """A real tiny policy (32 wide, 1 layer) and its tokenizer; copies of it with a truncated
    tokenizer, an edited vocab_size, and a tokenizer larger than the embedding; and the warm start of
    data set `a` (which arith.yaml's default shape does not match)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from hackable_rl.config.experiment import TinyModelConfig
    from hackable_rl.models.tiny import build_tiny_model
    from hackable_rl.models.tokenizer import train_tokenizer

    tokenizer = train_tokenizer([f"{a} + {b} = {a + b}" for a in range(30) for b in range(30)], 300)
    shape = TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, vocab_size=300)
    model = build_tiny_model(shape, tokenizer)
    real = workspace / "real_model"
    model.save_pretrained(real)
    tokenizer.save_pretrained(real)
    shutil.copytree(real, workspace / "cache" / "models" / "tiny-a-w0")  # replicate (pipeline seed) 0
    truncated = shutil.copytree(real, workspace / "truncated_tokenizer")
    text = (truncated / "tokenizer.json").read_text()
    (truncated / "tokenizer.json").write_text(text[: len(text) // 2])
    edited = shutil.copytree(real, workspace / "edited_vocab")
    config = json.loads((edited / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**config, "vocab_size": 50}))
    untemplated = shutil.copytree(real, workspace / "no_chat_template")
    (untemplated / "chat_template.jinja").unlink(missing_ok=True)
    settings = json.loads((untemplated / "tokenizer_config.json").read_text())
    (untemplated / "tokenizer_config.json").write_text(json.dumps({k: v for k, v in settings.items() if k != "chat_template"}))
    small = Qwen2ForCausalLM(Qwen2Config(**{**config, "vocab_size": 100}))
    small.save_pretrained(workspace / "small_embedding")
    tokenizer.save_pretrained(workspace / "small_embedding")


def _args(*parts: str) -> list[str]:
    return list(parts)


MASKED_SERVER = {"MLFLOW_TRACKING_URI": "http://alice:hunter2@127.0.0.1:9"}

pytestmark = pytest.mark.usefixtures("fresh_logging")

CASES = [
    # ---- YAML 1.1: octal and base-60 numbers, boolean keys (file:line)
    case("yaml-octal-seed", "validate -c octal.yaml", "octal.yaml:3: '010' reads as the number 8"),
    case("yaml-long-integer", "validate -c long_seed.yaml", "long_seed.yaml:3: an integer of 5000 digits is too long"),
    case("set-long-integer", f"validate -c plain.yaml --set seed={DIGITS}", "--set seed: an integer of 5000 digits"),
    case("generation-past-context", "validate -c plain.yaml --set generation.max_new_tokens=100000000",
         "generation.max_new_tokens: 100000000 does not fit the tiny policy's context of 512 positions"),
    case("data-path-a-fifo", "prepare -c plain.yaml --set data.provider=jsonl --set data.path=fifo",
         "data.path: fifo is a FIFO (named pipe), not a regular file"),
    case("data-path-a-folder", "prepare -c plain.yaml --set data.provider=jsonl --set data.path=.",
         "data.path: . is a folder, not a file"),
    case("empty-cache-dir", "validate -c plain.yaml --set storage.cache_dir=",
         "storage.cache_dir: is empty, which would mean the current folder"),
    case("empty-runs-dir", "validate -c plain.yaml --set storage.runs_dir=",
         "storage.runs_dir: is empty, which would mean the current folder"),
    case("yaml-octal-nested", "validate -c octal_nested.yaml", "octal_nested.yaml:4: '0100' reads as the number 64"),
    case("yaml-octal-train", "train -c octal.yaml", "octal.yaml:3: '010' reads as the number 8"),
    case("yaml-base-60", "validate -c sexagesimal.yaml", "sexagesimal.yaml:3: '1:30' reads as the number 90"),
    case("yaml-bool-key", "validate -c bool_key.yaml", "bool_key.yaml:3: key 'on' reads as the boolean True"),
    case("yaml-bool-key-nested", "validate -c bool_key_nested.yaml",
         "bool_key_nested.yaml:3: key 'yes' reads as the boolean True"),
    # ---- seeds: unsigned 32-bit integers only
    case("seed-negative", "validate -c plain.yaml --set seed=-1", "seed: -1 is not in [0, 4294967295]"),
    case("seed-past-32-bits", "validate -c plain.yaml --set seed=4294967296", "seed: 4294967296 is not in"),
    case("seed-huge-train", "train -c plain.yaml --set seed=99999999999999999999", "seed: 99999999999999999999"),
    case("seed-bool", "validate -c plain.yaml --set seed=true", "seed: got True"),
    case("seed-float", "validate -c plain.yaml --set seed=1.5", "seed: got 1.5"),
    case("seed-octal-set", "validate -c plain.yaml --set seed=010", "--set seed: '010' reads as the number 8 under YAML 1.1"),
    case("corruption-seed-negative", "validate -c plain.yaml --set corruption.seed=-3",
         "corruption.seed: -3 is not in"),
    # ---- values that would do nothing or harm
    case("think-open-empty", "validate -c plain.yaml --set rewards.think_open=", "rewards.think_open: '' is empty"),
    Case("think-close-blank", ["validate", "-c", "plain.yaml", "--set", "rewards.think_close=' '"],
         "rewards.think_close: ' ' is empty"),
    case("think-tags-equal", "validate -c plain.yaml --set rewards.think_close=<think>",
         "rewards.think_close: '<think>' is also think_open"),
    case("permanent-past-max", "validate -c plain.yaml --set trainer.permanent_steps=[99]",
         "trainer.permanent_steps: [99] are past trainer.max_steps 50"),
    case("permanent-past-max-train", "train -c plain.yaml --set trainer.max_steps=3 --set trainer.permanent_steps=[2,4]",
         "trainer.permanent_steps: [4] are past trainer.max_steps 3"),
    case("max-steps-1e400", "validate -c plain.yaml --set trainer.max_steps=1.0e+400", "trainer.max_steps: got inf"),
    # ---- names MLflow would refuse, refused at validate
    case("experiment-empty", "validate -c tracked.yaml --set tracking.experiment_name=",
         "tracking.experiment_name: '' is empty"),
    Case("experiment-blank", ["validate", "-c", "tracked.yaml", "--set", "tracking.experiment_name='  '"],
         "tracking.experiment_name: '  ' is empty"),
    case("experiment-too-long", f"validate -c tracked.yaml --set tracking.experiment_name={'e' * 300}",
         "tracking.experiment_name: is 300 characters long"),
    case("experiment-empty-train", "train -c tracked.yaml --set tracking.experiment_name=",
         "tracking.experiment_name: '' is empty"),
    case("model-name-slash", "validate -c tracked.yaml --set tracking.registered_model_name=team/policy",
         "tracking.registered_model_name: 'team/policy' contains '/' or ':'"),
    case("model-name-colon", "validate -c tracked.yaml --set tracking.registered_model_name=a:b",
         "tracking.registered_model_name: 'a:b' contains '/' or ':'"),
    case("model-name-empty", "validate -c tracked.yaml --set tracking.registered_model_name=",
         "tracking.registered_model_name: '' is empty"),
    case("model-name-dot", "validate -c tracked.yaml --set tracking.registered_model_name=.policy",
         "tracking.registered_model_name: '.policy' starts with '.'"),
    # ---- JSON rows: duplicate keys, numbers no float holds, empty inputs
    case("judge-duplicate-key", "judge -i dup_key.jsonl -o out.jsonl",
         "dup_key.jsonl:1: not valid JSON (duplicate key 'completion'"),
    case("judge-duplicate-nested-key", "judge -i dup_key_nested.jsonl -o out.jsonl",
         "dup_key_nested.jsonl:1: not valid JSON (duplicate key 'x'"),
    case("judge-5000-digits", "judge -i long_number.jsonl -o out.jsonl",
         "long_number.jsonl:1: not valid JSON (a number too long to read"),
    case("judge-1e400", "judge -i huge_float.jsonl -o out.jsonl", "huge_float.jsonl:1: not valid JSON (the number 1e400"),
    case("judge-neg-1e400-line-2", "judge -i huge_negative.jsonl -o out.jsonl",
         "huge_negative.jsonl:2: not valid JSON (the number -1e400"),
    case("judge-empty-input", "judge -i empty.jsonl -o out.jsonl", "empty.jsonl: holds no rows"),
    case("judge-blank-input", "judge -i blank.jsonl -o out.jsonl", "blank.jsonl: holds no rows"),
    case("data-duplicate-key", "prepare -c gsm8k.yaml --set data.path=dup_key_data.jsonl",
         "dup_key_data.jsonl:1: not valid JSON (duplicate key 'question'"),
    case("data-1e400", "prepare -c gsm8k.yaml --set data.path=huge_data.jsonl", "huge_data.jsonl:1: not valid JSON"),
    case("data-5000-digits", "prepare -c gsm8k.yaml --set data.path=long_data.jsonl",
         "long_data.jsonl:1: not valid JSON (a number too long"),
    case("data-duplicate-ids", "prepare -c dup_ids.yaml", "data: id 'jsonl-2' names two different problems"),
    # ---- outputs that must not be replaced, file names past 255 bytes
    case("judge-output-dev-null", "judge -i good.jsonl -o /dev/null", "--output /dev/null: is a character device"),
    case("judge-output-fifo", "judge -i good.jsonl -o fifo", "--output fifo: is a FIFO"),
    case("judge-output-link-to-folder", "judge -i good.jsonl -o link_to_folder", "--output link_to_folder: is a folder"),
    case("judge-input-name-too-long", f"judge -i {LONG_NAME} -o out.jsonl", f"{LONG_NAME}: file name too long"),
    case("judge-output-name-too-long", f"judge -i good.jsonl -o {LONG_NAME}", "file name too long"),
    case("params-name-too-long", f"validate -c {LONG_NAME}", f"{LONG_NAME}: file name too long"),
    case("data-path-name-too-long", f"prepare -c gsm8k.yaml --set data.path={LONG_NAME}", "file name too long"),
    # ---- stores and tracking URIs
    case("store-is-a-folder", "validate -c store_folder.yaml", "mlflow.db is a folder; expected an SQLite database"),
    case("store-is-a-text-file", "validate -c store_text.yaml", "mlflow.db is not an SQLite database"),
    case("uri-sqlite-folder", "promote --run-id 0123abcd -c tracked.yaml", "a_folder is a folder",
         MLFLOW_TRACKING_URI="sqlite:///a_folder"),
    case("uri-sqlite-text-file", "promote --run-id 0123abcd -c tracked.yaml", "a_file is not an SQLite database",
         MLFLOW_TRACKING_URI="sqlite:///a_file"),
    case("uri-file-scheme", "train -c tracked.yaml", "'file:./mlruns' is a folder store",
         MLFLOW_TRACKING_URI="file:./mlruns"),
    case("uri-plain-folder", "eval --base -c tracked.yaml", "'mlruns' is a folder store", MLFLOW_TRACKING_URI="mlruns"),
    case("uri-credentials-masked", "validate -c tracked.yaml", "'foo://***@host/x' has the unknown scheme",
         MLFLOW_TRACKING_URI="foo://alice:hunter2@host/x"),
    case("uri-unreachable-masked", "promote --run-id 0123abcd -c tracked.yaml",
         "MLflow store http://***@127.0.0.1:9 is unreachable", **MASKED_SERVER),
    # ---- ports, seeds lists, aliases, run ids
    case("ui-port-too-big", "ui --port 70000 -c plain.yaml", "--port: 70000 is not in [1, 65535]"),
    case("ui-port-zero", "ui --port 0 -c plain.yaml", "--port: 0 is not in [1, 65535]"),
    case("ui-port-negative", "ui --port -5 -c plain.yaml", "--port: -5 is not in [1, 65535]"),
    Case("seeds-empty", ["seeds", "--seeds", "", "--", "validate"], "--seeds '': no seed given"),
    case("seeds-only-commas", "seeds --seeds ,, -- validate", "--seeds ',,': no seed given"),
    case("seeds-repeated", "seeds --seeds 0,0 -- validate", "--seeds '0,0': a seed repeats"),
    case("seeds-negative", "seeds --seeds 1,-1 -- validate", "--seeds '1,-1': seeds are integers in [0, 4294967295]"),
    Case("alias-empty", ["promote", "--run-id", "0123abcd", "--alias", "", "-c", "plain.yaml"], "--alias ''"),
    case("alias-slash", "promote --run-id 0123abcd --alias a/b -c plain.yaml", "--alias 'a/b': expected"),
    Case("alias-space", ["promote", "--run-id", "0123abcd", "--alias", "my alias", "-c", "plain.yaml"],
         "--alias 'my alias'"),
    case("alias-latest", "promote --run-id 0123abcd --alias latest -c plain.yaml", "--alias 'latest': reserved"),
    case("alias-version", "promote --run-id 0123abcd --alias v3 -c plain.yaml", "--alias 'v3': reserved"),
    case("alias-too-long", f"promote --run-id 0123abcd --alias {'a' * 256} -c plain.yaml", "--alias 'aaaa"),
    Case("run-id-quote", ["promote", "--run-id", "a'b", "-c", "plain.yaml"], "--run-id \"a'b\": not an MLflow run id"),
    Case("run-id-eval-space", ["eval", "--run-id", "x y", "-c", "tracked.yaml"], "--run-id 'x y': not an MLflow run id"),
    # ---- run folders edited by hand, checkpoints damaged (train --resume auto)
    *[
        case(f"run-json-{name}", f"train -c plain.yaml --resume auto --set tracking.run_name={name}",
             f"{name}/run.json: field {next(iter(edit))!r} is")
        for name, edit in RUN_JSON_EDITS.items()
    ],
    case("run-json-a-list", "train -c plain.yaml --resume auto --set tracking.run_name=run-json-list",
         "run-json-list/run.json: expected a JSON object"),
    case("run-json-duplicate-key", "train -c plain.yaml --resume auto --set tracking.run_name=run-json-dup-key",
         "run-json-dup-key/run.json:1: not valid JSON (duplicate key 'status'"),
    case("permanent-step-final", "train -c plain.yaml --resume auto --set tracking.run_name=step-final",
         "permanent/step-final: not a permanent checkpoint of hackable-rl"),
    case("permanent-stray-file", "train -c plain.yaml --resume auto --set tracking.run_name=stray-file",
         "permanent/notes.txt: not a permanent checkpoint of hackable-rl"),
    case("resume-only-checkpoint-corrupt", "train -c plain.yaml --resume auto --set tracking.run_name=corrupt-only",
         "--resume auto found no resumable checkpoint"),
    case("resume-trainer-state-empty", "train -c plain.yaml --resume auto --set tracking.run_name=state-empty",
         "--resume auto found no resumable checkpoint"),
    case("resume-shape-change-forced",
         "train -c plain.yaml --resume auto --allow-config-change --set tracking.run_name=shape "
         "--set model.tiny.hidden_size=64", "model.tiny.hidden_size: was 128, now 64; the checkpoint holds"),
    case("resume-lora-change-forced",
         "train -c plain.yaml --resume auto --allow-config-change --set tracking.run_name=shape --set lora.enabled=true",
         "lora.enabled: was false, now true; the checkpoint holds"),
    case("train-over-someone-elses-folder", "train -c plain.yaml --set tracking.run_name=a_folder_run",
         "a_folder_run: exists but holds no run.json"),
    # ---- event logs and run.json of `sync`
    case("sync-event-without-delivered", "sync sync_no_delivered -c plain.yaml",
         "sync_no_delivered/tracking-events.jsonl:1: event row without 'delivered'"),
    case("sync-event-without-event", "sync sync_no_event -c plain.yaml",
         "sync_no_event/tracking-events.jsonl:1: event row without 'event'"),
    case("sync-event-duplicate-key", "sync sync_dup_key -c plain.yaml",
         "sync_dup_key/tracking-events.jsonl:1: not valid JSON (duplicate key 'delivered'"),
    case("sync-run-json-a-list", "sync sync_run_json_list -c plain.yaml", "sync_run_json_list/run.json: expected a JSON"),
    # ---- model folders that do not fit together
    case("warm-start-of-another-shape", "eval --base -c arith.yaml",
         "model.tiny.hidden_size: 128, but the warm-started policy"),
    case("lora-unknown-target",
         "train -c tinyshape.yaml --set lora.enabled=true --set lora.target_modules=[nope_proj] "
         "--set tracking.run_name=lora-bad", "lora.target_modules: 'nope_proj' is no module of the policy"),
    case("model-truncated-tokenizer", "eval --model truncated_tokenizer -c tinyshape.yaml",
         "truncated_tokenizer/tokenizer.json:"),
    case("model-vocab-edited", "eval --model edited_vocab -c tinyshape.yaml",
         "edited_vocab: its weights do not have the shapes its config.json declares"),
    case("model-tokenizer-past-embedding", "eval --model small_embedding -c tinyshape.yaml",
         "tokens but the model's embedding only 100"),
    # ---- the command-line parser's own errors, in the one-line form (no framed box)
    case("parser-unknown-option", "train --bogus", "No such option: --bogus"),
    case("parser-value-not-an-int", "eval --step abc", "Invalid value for '--step'"),
    case("parser-unknown-command", "trian", "No such command 'trian'"),
    case("parser-top-level-option", "--bogus validate", "No such option: --bogus"),
    case("parser-missing-value", "validate --config", "Option '--config' requires an argument"),
    case("seeds-command-sets-seed", "seeds --seeds 0,1 -- validate -c plain.yaml --set seed=3",
         "seeds: the command after -- sets seed"),
    case("yaml-merge-sets-a-key-twice", "validate -c merge_twice.yaml",
         "merge_twice.yaml:"),
    case("threads-past-any-machine", "validate -c plain.yaml --set torch_threads=99999999999999999999",
         "torch_threads: 99999999999999999999 is not in [1, 1024]"),
    case("steps-past-what-torch-indexes", "validate -c plain.yaml --set trainer.max_steps=99999999999999999999999",
         "trainer.max_steps: 99999999999999999999999 is more than 2,147,483,647"),
    Case("config-empty-path", ["validate", "-c", ""], "validate -c '': an empty path"),
    case("config-a-fifo", "validate -c fifo", "fifo: is a FIFO (named pipe)"),
    case("study-file-a-fifo", "payoff -c plain.yaml --study fifo", "--study fifo: is a FIFO (named pipe)"),
    case("alarm-bench-a-fifo", "alarm-bench fifo", "fifo: is a FIFO (named pipe)"),
    case("extra-vllm-missing", "eval --base -c plain.yaml --set generation.use_vllm=true",
         "generation.use_vllm: true needs vllm, which is not installed: pip install 'hackable-rl[gpu]'"),
    case("extra-flash-attention-missing", "eval --base -c plain.yaml --set model.attn_implementation=flash_attention_2",
         "needs flash_attn, which is not installed: pip install 'hackable-rl[gpu]'"),
    case("optimizer-8bit-without-bitsandbytes", "train -c plain.yaml --set trainer.optimizer=adamw_8bit",
         "trainer.optimizer: adamw_bnb_8bit needs bitsandbytes, which is not installed: pip install 'hackable-rl[gpu]'"),
    case("output-is-the-input", "judge -i good.jsonl -o good.jsonl", "--output good.jsonl is --input good.jsonl (the same file)"),
    case("output-folder-holds-the-input", "alarm-bench a_folder --out a_folder -c plain.yaml",
         "--out a_folder holds studies a_folder"),
    case("gsm8k-row-without-its-marker", "prepare -c gsm8k.yaml --set data.path=no_marker_data.jsonl",
         "no_marker_data.jsonl:1: field 'answer': a GSM8K answer ends in '#### <number>'"),
    case("judge-completion-not-text", "judge -i number_completion.jsonl -o judged_number.jsonl",
         "number_completion.jsonl:1: field 'completion' must be a string, got int"),
    case("output-is-the-input-equals-spelling", "judge -i good.jsonl --output=good.jsonl",
         "--output good.jsonl is --input good.jsonl (the same file)"),
    case("run-name-too-long-for-a-file", f"validate -c plain.yaml --set tracking.run_name={LONG_NAME}",
         "tracking.run_name: "),
    case("data-name-too-long-for-a-file", f"validate -c plain.yaml --set data.name={LONG_NAME}", "data.name: "),
    case("set-key-given-twice", "validate -c plain.yaml --set seed=1 --set seed=2",
         "seed is set twice ('seed=1', then 'seed=2'); give each key once"),
    case("model-without-chat-template", "eval --base -c tinyshape.yaml --set model.source=no_chat_template",
         "no_chat_template: its tokenizer has no chat template"),
    # the audited alarm: refused before anything of a run is made (tests/test_alarm_audit.py: a judge's bad verdict)
    case("audit-k-zero", "train -c plain.yaml --set alarm.audit.k=0", "alarm.audit.k: 0 is below the minimum 1"),
    case("audit-k-negative", "validate -c plain.yaml --set alarm.audit.k=-3", "alarm.audit.k: -3 is below the minimum 1"),
    case("audit-k-above-the-step", "train -c plain.yaml --set alarm.audit.k=1000",
         "alarm.audit.k: 1000 is more than the 32 completions of a step"),
    case("audit-judge-not-importable", "train -c plain.yaml --set alarm.audit.k=2 --set alarm.audit.judge=no_such_module:judge",
         "alarm.audit.judge: 'no_such_module:judge': cannot import module"),
    case("audit-judge-not-a-function", "train -c plain.yaml --set alarm.audit.k=2 --set alarm.audit.judge=os:sep",
         "alarm.audit.judge: 'os:sep' is str"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """The corpus's files, run folders and model folders, with data set `a` prepared."""
    folder = write_corpus(tmp_path_factory.mktemp("bad-inputs-more"), FILES, FOLDERS)
    os.mkfifo(folder / "fifo")
    (folder / "link_to_folder").symlink_to(folder / "a_folder")
    (folder / "cache" / "artifacts" / "runs" / "a_folder_run").mkdir(parents=True)
    (folder / "cache" / "artifacts" / "runs" / "a_folder_run" / "notes.txt").write_text("mine\n")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        _make_runs(folder)
        _make_models(folder)
        prepared = CliRunner().invoke(app, ["prepare", "-c", "arith.yaml"])
    finally:
        os.chdir(previous)
    assert prepared.exit_code == 0, prepared.output
    return folder


def test_the_second_corpus_is_large_and_new():
    from test_bad_inputs import CASES as FIRST

    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    assert not {c.id for c in CASES} & {c.id for c in FIRST}


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_exit_2(bad: Case, workspace: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    before = _snapshot(workspace)
    result = CliRunner().invoke(app, bad.args, env=bad.env or None)
    assert_refused_in_one_line(result, bad)
    assert "hunter2" not in result.output  # a credential in a URI is never shown
    assert _snapshot(workspace) == before or _only_new_run_files(before, _snapshot(workspace))


def _snapshot(workspace: Path) -> dict[str, bytes]:
    """Every regular file of the corpus's inputs, by content (what a refused command must not lose)."""
    kept = {}
    for path in workspace.rglob("*"):
        relative = path.relative_to(workspace).as_posix()
        if path.is_file() and not path.is_symlink() and not relative.startswith(("cache/mlflow", "cache/logs")):
            kept[relative] = path.read_bytes()
    return kept


def _only_new_run_files(before: dict[str, bytes], after: dict[str, bytes]) -> bool:
    """A refused `train` may have made its own run folder (and lock file), a refused resume its lock
    file and `abandoned/` (a corrupt checkpoint set aside, never deleted); nothing that existed changed."""
    changed = {name for name in before if after.get(name) != before[name]}
    moved_aside = {name for name in changed if "/checkpoints/resume/" in name}
    return changed == moved_aside and all(
        name.replace("/checkpoints/resume/", "/abandoned/resume/") in after for name in moved_aside
    )


def test_seeds_give_each_child_its_own_output_in_any_spelling() -> None:
    """A folder or file a wrapper hands to several child runs is rewritten per seed whether it is
    spelled `--out DIR`, `--out=DIR`, `-o FILE` or `--metrics-dir=DIR`, so no two seeds write one place."""
    from hackable_rl.scheduling.seeds import seed_runs

    runs = seed_runs(["judge", "-o", "judged.jsonl", "--metrics-dir=metrics/x", "--out", "reports"], [0, 1], 2, Path("logs"))
    for run in runs:
        tail = run.command[run.command.index("judge"):]
        seed = run.seed
        assert tail[:5] == ["judge", "-o", f"judged-s{seed}.jsonl", f"--metrics-dir=metrics/x/s{seed}", "--out"]
        assert tail[5] == f"reports/s{seed}"
