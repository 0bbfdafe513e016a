"""Shared fixtures: a tiny project (prepared data + a warm-started tiny policy) built once per session."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

# Imported before any test module loads torch: it pins the CPU dispatch (core/numerics.py), so the
# suite's numbers are the same on CPUs with and without AVX-512, as every command's are.
import hackable_rl  # noqa: F401
from hackable_rl.config.experiment import TinyModelConfig


def pytest_configure(config) -> None:
    """transformers' library logger binds its handler to whatever sys.stderr is when it is first used;
    first used inside a CliRunner invocation, it keeps that runner's stream, which is closed afterwards,
    and a later library warning prints a logging traceback into another test's output. Configured
    here, it holds the session's stream."""
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("transformers")


REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"  # the pinned data sets the repository carries (data/README.md)

# Seconds-scale settings: a 1-layer model, 8 completions per step, 16 new tokens.
TINY_PARAMS = {
    "seed": 0,
    "storage": {"cache_dir": "cache"},
    "tracking": {"experiment_name": "tests", "registered_model_name": "tests-policy"},
    "data": {"name": "arith", "provider": "arith", "train_size": 64, "test_size": 8, "validation_size": 8, "sft_size": 96},
    "model": {
        "source": "tiny",
        "tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "vocab_size": 300},
    },
    "warmstart": {"steps": 3, "batch_size": 8, "warmup_steps": 1, "eval_size": 4},
    "generation": {"max_new_tokens": 16},
    "trainer": {
        "max_steps": 3, "per_device_train_batch_size": 8, "num_generations": 4, "save_steps": 2,
        "permanent_steps": [2], "learning_rate": 1e-4,
    },
    "corruption": {"channel": "flip", "rate": 0.2},
    "evaluation": {"n": 2, "k": [1, 2], "max_prompts": 4, "batch_size": 16},
}


TINY_SHAPE = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, vocab_size=300)
"""A two-layer tiny model's shape: what the models' unit tests build in milliseconds."""
TINY_CORPUS = [
    f"Problem: Ann has {a} pens. Ann buys {b} more. How many pens does Ann have now?\n"
    f"Answer: <think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}"
    for a in range(2, 30, 3)
    for b in range(2, 30, 4)
]
"""The text the tiny tokenizer is trained on."""


@pytest.fixture(scope="module")
def tokenizer():
    """A tokenizer trained on TINY_CORPUS (300 words)."""
    from hackable_rl.models.tokenizer import train_tokenizer

    return train_tokenizer(TINY_CORPUS, vocab_size=300)


@pytest.fixture(scope="module")
def tiny(tokenizer):
    """A two-layer tiny model (TINY_SHAPE) in eval mode, seeded."""
    import torch

    from hackable_rl.models.tiny import build_tiny_model

    torch.manual_seed(0)
    return build_tiny_model(TINY_SHAPE, tokenizer).eval()


def _merge(base: dict, changes: dict) -> dict:
    merged = dict(base)
    for key, value in changes.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def write_params(folder: Path, overrides: dict | None = None) -> Path:
    """The repository's params.yaml with the seconds-scale settings (and `overrides`) merged in: every
    section stays present, as DVC's per-key params need."""
    params = _merge(yaml.safe_load((REPO / "params.yaml").read_text()), TINY_PARAMS)
    for dotted, value in (overrides or {}).items():
        node = params
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.fixture
def tiny_params_writer():
    """`write(folder, {"dotted.key": value})` writes the seconds-scale params.yaml into folder."""
    return write_params


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory) -> Path:
    """A folder with params.yaml, prepared arith data and a warm-started tiny policy (no MLflow run)."""
    from hackable_rl.config.loading import load_config
    from hackable_rl.data.prepare import prepare_dataset
    from hackable_rl.warmstart import run_warmstart

    folder = tmp_path_factory.mktemp("tiny-project")
    write_params(folder)
    previous = Path.cwd()
    os.chdir(folder)
    try:
        config = load_config("params.yaml", ["tracking.enabled=false"])
        prepare_dataset(config)
        run_warmstart(config)
    finally:
        os.chdir(previous)
    return folder


@pytest.fixture
def project(tiny_project: Path, tmp_path: Path, monkeypatch) -> Path:
    """A private copy of the tiny project (its own MLflow store), as the current directory."""
    import shutil

    target = tmp_path / "project"
    shutil.copytree(tiny_project, target)
    monkeypatch.chdir(target)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return target


@pytest.fixture
def fresh_logging():
    """`main` attaches a log handler to the stderr of the first CLI invocation; CliRunner closes that
    stream afterwards, so each test that invokes the CLI in-process gets (and drops) its own handler."""
    root = logging.getLogger()
    before = list(root.handlers)
    root.handlers = [handler for handler in before if type(handler) is not logging.StreamHandler]
    yield
    root.handlers = before


SMALL_CORPUS = [f"Problem: Ann has {a} pens. Ann buys {b} more.\nAnswer: <think>{a}+{b}={a + b}</think> \\boxed{{{a + b}}}"
                for a in range(2, 30, 3) for b in range(2, 30, 4)]


@pytest.fixture(scope="session")
def small_tokenizer():
    """A 300-word tokenizer of arithmetic problems and worked solutions (models' unit tests)."""
    from hackable_rl.models.tokenizer import train_tokenizer

    return train_tokenizer(SMALL_CORPUS, vocab_size=300)


def small_llama(tokenizer, num_layers: int):
    """A seeded Llama-style policy of width 32 with `num_layers` blocks, in eval mode."""
    import torch

    from hackable_rl.config.experiment import TinyModelConfig
    from hackable_rl.models.tiny import build_tiny_model

    torch.manual_seed(0)
    config = TinyModelConfig(architecture="llama", hidden_size=32, num_layers=num_layers, num_heads=2,
                             intermediate_size=64, vocab_size=300)
    return build_tiny_model(config, tokenizer).eval()


@pytest.fixture(scope="module")
def small_policy(request, small_tokenizer):
    """`small_llama` with the test module's SMALL_LAYERS blocks (2 unless it says)."""
    return small_llama(small_tokenizer, getattr(request.module, "SMALL_LAYERS", 2))
