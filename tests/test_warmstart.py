"""The warm-start stage on small fixture data: SFT mechanics, determinism, outputs, pretrained reference."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
import torch

from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.data.prompting import render_completion, render_prompt
from hackable_rl.models.loading import SMOLLM2, load_policy, policy_dir, smollm2_gguf
from hackable_rl.models.tiny import build_tiny_model
from hackable_rl.models.tokenizer import train_tokenizer
from hackable_rl.warmstart import run_warmstart
from hackable_rl.warmstart.data import SftExample, load_sft_examples
from hackable_rl.warmstart.sft import collate, encode_examples, sft_steps, warmup_cosine

SMALL_MODEL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "vocab_size": 300}


def _row(index: int, rng: random.Random, with_solution: bool) -> dict:
    a, b = rng.randint(2, 30), rng.randint(2, 30)
    question = f"Ann has {a} pens. Ann buys {b} more. How many pens does Ann have now?"
    return {
        "id": f"fx-{index}",
        "question": question,
        "prompt": render_prompt(question),
        "reference": str(a + b),
        "metadata": {"source": "fixture", "n_steps": 1 + index % 2},
        "solution": render_completion(f"{a}+{b}={a + b}", str(a + b)) if with_solution else None,
    }


def _write_dataset(root, name="fixture", sft=64, train=16, held_out=12):
    rng = random.Random(0)
    folder = root / "cache" / "datasets" / name
    write_jsonl(folder / "sft.jsonl", [_row(i, rng, True) for i in range(sft)])
    write_jsonl(folder / "train.jsonl", [_row(sft + i, rng, False) for i in range(train)])
    write_jsonl(folder / "validation.jsonl", [_row(sft + train + i, rng, False) for i in range(held_out)])
    return folder


def _config(tmp_path, steps=4, tracking=False, **extra):
    raw = {
        "storage": {"cache_dir": str(tmp_path / "cache")},
        "tracking": {"enabled": tracking, "experiment_name": "warmstart-test"},
        "data": {"name": "fixture"},
        "model": {"tiny": SMALL_MODEL},
        "warmstart": {
            "steps": steps,
            "batch_size": 8,
            "learning_rate": 3e-3,
            "warmup_steps": 2,
            "eval_size": 10,
        },
        "generation": {"max_new_tokens": 12},
        "evaluation": {"batch_size": 16},
        **extra,
    }
    return validate_config(raw)


def test_warmup_cosine_hand_values():
    multiplier = warmup_cosine(warmup_steps=2, total_steps=6)
    assert [multiplier(step) for step in (0, 1, 2, 4, 6)] == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.0])


def test_collate_scores_completion_tokens_only():
    batch = collate([([5, 6, 7, 8], 2), ([9, 10], 1)], pad_id=1)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8], [9, 10, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 7, 8], [-100, 10, -100, -100]]


def test_encode_appends_eos_and_splits_prompt_from_completion():
    tokenizer = train_tokenizer(["Answer: <think>1+2=3</think> \\boxed{3}"] * 5, vocab_size=280)
    [(ids, prompt_length)] = encode_examples(tokenizer, [SftExample("Answer: ", "\\boxed{3}")], max_length=64)
    assert ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids[:prompt_length]) == "Answer: "
    assert tokenizer.decode(ids[prompt_length:-1]) == "\\boxed{3}"
    with pytest.raises(UserError, match="max_position_embeddings: 4"):
        encode_examples(tokenizer, [SftExample("Answer: ", "\\boxed{3}")], max_length=4)


def test_sft_rows_without_solution_name_file_and_line(tmp_path):
    path = tmp_path / "sft.jsonl"
    write_jsonl(path, [{"prompt": "p", "solution": "s"}, {"prompt": "p", "solution": None}])
    with pytest.raises(UserError, match=r"sft.jsonl:2: expected a non-empty string `solution`"):
        load_sft_examples(path)


def _sft_setup(tmp_path, steps):
    folder = _write_dataset(tmp_path)
    config = _config(tmp_path, steps=steps)
    examples = load_sft_examples(folder / "sft.jsonl")
    tokenizer = train_tokenizer((e.prompt + e.completion for e in examples), 300)
    torch.manual_seed(config.seed)
    model = build_tiny_model(config.model.tiny, tokenizer)
    return model, encode_examples(tokenizer, examples, 512), config, tokenizer.pad_token_id


def test_a_few_warm_start_steps_lower_the_loss(tmp_path):
    model, encoded, config, pad_id = _sft_setup(tmp_path, steps=20)
    losses = sft_steps(model, encoded, config, pad_id)
    assert len(losses) == 20
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5


def test_warm_start_is_bit_identical_across_runs(tmp_path):
    runs = []
    for _ in range(2):
        model, encoded, config, pad_id = _sft_setup(tmp_path, steps=3)
        runs.append((sft_steps(model, encoded, config, pad_id), model.state_dict()))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(runs[0][1][key], runs[1][1][key]) for key in runs[0][1])


def test_warmstart_end_to_end_writes_model_and_metrics(tmp_path):
    _write_dataset(tmp_path)
    config = _config(tmp_path, steps=5, tracking=True)
    metrics_path = tmp_path / "metrics" / "warmstart.json"
    metrics = run_warmstart(config, metrics_path)

    target = policy_dir(config)
    assert target.name == "tiny-fixture-w0"  # one warm start per replicate (pipeline seed 0)
    assert (target / "model.safetensors").exists() and (target / "tokenizer.json").exists()
    record = json.loads((target / "warmstart.json").read_text())
    assert record["steps"] == 5 and record["seed"] == 0 and len(record["config_hash"]) == 16
    written = json.loads(metrics_path.read_text())
    machine = written.pop("machine")  # which machine made the warm start (core.numerics.machine_record)
    assert machine["cpu"] and machine["dispatch"]["torch_cpu_capability"] and machine["torch_threads"] >= 1
    assert written == json.loads(json.dumps(metrics))
    assert "machine" not in record  # the model folder's record: its hash must not depend on the machine
    assert written["eval_scored"] == 10 and 0.0 <= written["accuracy"] <= 1.0
    assert set(written["accuracy_by_difficulty"]) == {"n_steps=1", "n_steps=2"}
    assert written["loss"]["min"] <= written["loss"]["first"] and len(written["loss"]["curve"]) == 5
    assert written["in_target"] == (0.4 <= written["accuracy"] <= 0.7)
    assert (tmp_path / "cache" / "mlflow").is_dir()  # the tracker opened the embedded store

    model, tokenizer = load_policy(config)
    assert model.num_parameters() == metrics["parameters"] and tokenizer.padding_side == "left"


def test_warmstart_without_prepared_data_says_to_prepare(tmp_path):
    with pytest.raises(UserError, match="run `hackable-rl prepare` first"):
        run_warmstart(_config(tmp_path), tmp_path / "metrics.json")


def test_pretrained_source_records_reference_and_hash(tmp_path):
    config = _config(tmp_path, model={"source": SMOLLM2})
    metrics = run_warmstart(config, tmp_path / "metrics" / "warmstart.json")
    reference = json.loads((policy_dir(config) / "reference.json").read_text())
    gguf = smollm2_gguf()
    expected = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert reference["sha256"] == {gguf.name: expected}
    assert (reference["kind"], reference["gguf_file"]) == ("gguf", gguf.name)
    assert metrics["trained"] is False and metrics["reference"] == reference


def test_cli_warmstart_runs_the_stage(tmp_path, monkeypatch):
    import yaml
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    _write_dataset(tmp_path)
    raw = _config(tmp_path, steps=2).model_dump(mode="json")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["warmstart", "--config", "params.yaml"])
    assert result.exit_code == 0, result.output
    assert "held-out greedy accuracy" in result.output
    assert (tmp_path / "metrics" / "warmstart.json").exists()


def test_cli_warmstart_without_data_exits_2_with_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("data:\n  name: nothing\ntracking:\n  enabled: false\n")
    result = CliRunner().invoke(app, ["warmstart"])
    assert result.exit_code == 2
    assert "run `hackable-rl prepare` first" in result.output
