"""The prepare stage: outputs, manifest, determinism, disjointness, and the CLI command."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.data import load_split, prepare_dataset, read_prepared
from hackable_rl.data.prompting import PROMPT_PREFIX
from hackable_rl.extensions import load_resolved

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
GSM8K_TRAIN = DATA / "gsm8k" / "train.jsonl"
GSM8K_TEST = DATA / "gsm8k" / "test.jsonl"
SMALL_ARITH = ["data.train_size=60", "data.test_size=20", "data.validation_size=10", "data.sft_size=30", "data.arith.hedged_share=0.1"]


def config(tmp_path: Path, *overrides: str, cache: str = "cache"):
    return load_resolved(REPO / "params.yaml", [f"storage.cache_dir={tmp_path / cache}", *overrides])


def gsm8k_overrides(*extra: str) -> list[str]:
    """The GSM8K settings, each key once: an `extra` setting replaces the default of its key (the
    command line refuses a key given twice)."""
    defaults = ["data.provider=gsm8k", "data.name=gsm8k", f"data.path={GSM8K_TRAIN}", f"data.test_path={GSM8K_TEST}",
                "data.train_size=null", "data.test_size=null", "data.sft_size=0"]
    given = {setting.split("=", 1)[0] for setting in extra}
    return [setting for setting in defaults if setting.split("=", 1)[0] not in given] + list(extra)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_arith_outputs_and_manifest(tmp_path):
    result = prepare_dataset(config(tmp_path, *SMALL_ARITH))
    assert result.out_dir == tmp_path / "cache" / "datasets" / "arith"
    assert result.counts == {"train": 60, "validation": 10, "test": 20, "sft": 30}
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["counts"] == {"train": 60, "validation": 10, "test": 20, "sft": 30}
    assert manifest["seed"] == 0 and manifest["skipped_rows"] == 0
    overlaps = manifest["disjointness"]["overlaps"]
    assert set(overlaps) == {
        "train/validation", "train/test", "train/sft", "validation/test", "validation/sft", "test/sft",
        "test/train chains", "test/validation chains", "test/sft chains",
    }
    assert not any(overlaps.values())
    assert manifest["breakdown"]["sft"]["hedged"] == {"False": 27, "True": 3}
    assert (
        manifest["sources"][0]["kind"] == "generated" and manifest["settings"]["arith"]["hedged_share"] == 0.1
    )
    for split in ("train", "validation", "test", "sft"):
        assert manifest["outputs"][split]["sha256"] == sha256(result.out_dir / f"{split}.jsonl")
    row = read_prepared(config(tmp_path, *SMALL_ARITH), "train")[0]
    assert set(row) == {"id", "question", "reference", "metadata", "solution", "prompt"}
    assert row["prompt"] == f"{PROMPT_PREFIX}Problem: {row['question']}\nAnswer: "
    assert row["solution"] is None


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    first = prepare_dataset(config(tmp_path, *SMALL_ARITH, cache="a"))
    again = prepare_dataset(config(tmp_path, *SMALL_ARITH, cache="b"))
    other = prepare_dataset(config(tmp_path, *SMALL_ARITH, "seed=1", cache="c"))
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl", "sft.jsonl", "manifest.json"):
        assert (first.out_dir / name).read_bytes() == (again.out_dir / name).read_bytes()
    assert (first.out_dir / "train.jsonl").read_bytes() != (other.out_dir / "train.jsonl").read_bytes()


def test_arith_prompts_hold_no_answer_beyond_operands(tmp_path):
    # Fair check: the prompt's numbers are exactly the story's operands (the prefix has none), so
    # the answer shows up only when it equals an operand; no worked step or filled box appears.
    prepare_dataset(config(tmp_path, *SMALL_ARITH))
    for split in ("train", "validation", "test", "sft"):
        for row in read_prepared(config(tmp_path, *SMALL_ARITH), split):
            assert [int(n) for n in re.findall(r"\d+", row["prompt"])] == row["metadata"]["operands"]
            assert "=" not in row["prompt"] and f"\\boxed{{{row['reference']}}}" not in row["prompt"]


def test_gsm8k_prepare_counts_disjoint_and_no_solution_in_prompt(tmp_path):
    cfg = config(tmp_path, *gsm8k_overrides())
    result = prepare_dataset(cfg)
    # validation (200) is held out of GSM8K's train file; GSM8K's own test split stays the test split
    assert result.counts == {"train": 7273, "validation": 200, "test": 1319}
    assert not (result.out_dir / "sft.jsonl").exists()
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["disjointness"]["overlaps"]["train/test"] == 0
    assert [source["sha256"] for source in manifest["sources"]] == [sha256(GSM8K_TRAIN), sha256(GSM8K_TEST)]
    solutions = {row["question"].strip(): row["answer"] for row in read_jsonl(GSM8K_TEST)}
    # Fair check: the prompt is exactly prefix + question (a solution's first line may restate the
    # question, so that alone proves nothing), and neither the worked solution nor `####` is in it.
    for row in read_prepared(cfg, "test"):
        assert row["prompt"] == f"{PROMPT_PREFIX}Problem: {row['question'].strip()}\nAnswer: "
        assert "####" not in row["prompt"] and solutions[row["question"].strip()] not in row["prompt"]
    assert len(load_split(cfg, "train")) == 7273


def test_overlapping_splits_are_an_error(tmp_path):
    cfg = config(tmp_path, *gsm8k_overrides(f"data.path={GSM8K_TEST}", "data.validation_size=0"))
    with pytest.raises(UserError) as error:
        prepare_dataset(cfg)
    assert error.value.problems[0].startswith("data: 1319 train problems also appear in test (gsm8k-")


def test_read_prepared_before_prepare_says_what_to_run(tmp_path):
    with pytest.raises(UserError, match=r"not prepared; run `hackable-rl prepare`"):
        read_prepared(config(tmp_path), "train")
    with pytest.raises(UserError, match="expected one of train, validation, test, sft"):
        read_prepared(config(tmp_path), "eval")


def test_skip_mode_is_counted_in_the_manifest(tmp_path):
    bad = tmp_path / "bad.jsonl"
    rows = [
        json.dumps({"question": f"What is {n} plus {n}?", "answer": f"#### {2 * n}"}) for n in range(1, 9)
    ]
    rows[2] = '{"question": '
    rows[5] = json.dumps({"question": "What is nothing?", "answer": "####"})
    bad.write_text("\n".join(rows) + "\n")
    overrides = [f"data.path={bad}", "data.test_path=null", "data.test_size=2", "data.validation_size=0", "data.on_bad_row=skip"]
    result = prepare_dataset(config(tmp_path, *gsm8k_overrides(*overrides)))
    manifest = json.loads(result.manifest_path.read_text())
    assert result.counts == {"train": 4, "validation": 0, "test": 2} and manifest["skipped_rows"] == 2
    assert [line.split(": ")[0] for line in manifest["skipped_examples"]] == [f"{bad}:3", f"{bad}:6"]


def test_cli_prepare_prints_counts_and_output_dir(tmp_path):
    runner = CliRunner()
    args = ["prepare", "--config", str(REPO / "params.yaml"), "--set", f"storage.cache_dir={tmp_path}"]
    args += [item for setting in SMALL_ARITH for item in ("--set", setting)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "prepared arith (arith): train 60, validation 10, test 20, sft 30; skipped bad rows 0" in result.output
    assert f"output: {tmp_path / 'datasets' / 'arith'}" in result.output


def test_cli_prepare_bad_row_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"question": "What is 1 plus 1?", "answer": "#### 2"}) + "\n" + '{"answer": "#### 3"}\n'
    )
    args = ["prepare", "--config", str(REPO / "params.yaml"), "--set", f"storage.cache_dir={tmp_path}"]
    settings = gsm8k_overrides(f"data.path={bad}", "data.test_path=null", "data.test_size=1", "data.validation_size=0")
    args += [item for setting in settings for item in ("--set", setting)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert f"error: {bad}:2: field 'question' is missing" in result.output


def test_test_split_shares_no_computation_chain_with_any_other_split(tmp_path):
    # Read back from the prepared files: test asks for arithmetic no demonstration, GRPO prompt or
    # validation problem computes (operands and operators in order), and no question repeats.
    sizes = ["data.train_size=400", "data.test_size=150", "data.validation_size=60", "data.sft_size=2000"]
    cfg = config(tmp_path, *sizes)
    prepare_dataset(cfg)

    def chain(row):
        operands, operators = row["metadata"]["operands"], row["metadata"]["operators"]
        return (tuple(operands), tuple(operators))

    rows = {split: read_prepared(cfg, split) for split in ("train", "validation", "test", "sft")}
    test_chains = {chain(row) for row in rows["test"]}
    for split in ("train", "validation", "sft"):
        assert not test_chains & {chain(row) for row in rows[split]}, split
    assert not {chain(row) for row in rows["validation"]} & {chain(r) for r in rows["train"] + rows["sft"]}
    questions = [row["question"] for split_rows in rows.values() for row in split_rows]
    assert len(questions) == len(set(questions))
