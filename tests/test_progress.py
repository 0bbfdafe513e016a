"""The quiet console, piece by piece: periodic progress lines off a terminal, the training progress
line and its interval, and no artifact bars for a local MLflow store."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

import hackable_rl.core.progress as progress
from hackable_rl.core.progress import PeriodicProgress, progress_bar
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.store import quiet_local_transfers
from hackable_rl.training.console import TrainingProgress, loss_note, progress_line

PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_periodic_progress_writes_a_line_per_period_and_one_at_the_end():
    clock, lines = FakeClock(), []
    counter = PeriodicProgress(4000, "eval", "completions", period_s=10, clock=clock, write=lines.append)
    clock.now += 4
    counter.advance(128)  # 4 s after the start: too soon
    clock.now += 8
    counter.advance(128)  # 12 s: a line
    clock.now += 5
    counter.advance(256)  # 5 s after that line: too soon
    clock.now += 30
    counter.advance(3488)  # done: always a line
    assert lines == ["eval: 256/4000 completions (6%), 12 s", "eval: 4000/4000 completions (100%), 47 s"]


def test_progress_bar_off_a_terminal_logs_lines_or_nothing(monkeypatch, caplog):
    monkeypatch.setattr(progress, "_stderr_is_terminal", lambda: False)
    with caplog.at_level(logging.INFO, logger="hackable_rl.core.progress"):
        with progress_bar(3, "warm start", "steps", lines_when_piped=False) as advance:
            for _ in range(3):
                advance()
        assert caplog.messages == []
        with progress_bar(3, "eval greedy", "completions") as advance:
            advance(2)
            advance(1)
    assert caplog.messages == ["eval greedy: 3/3 completions (100%), 0 s"]


def test_progress_line_means_the_window_and_shows_missing_as_a_dash():
    rows = [
        {"judge/correctness": 0.5, "reward/observed": 0.75, "hacking_gap": 0.25, "trl/loss": -1e-9},
        {"judge/correctness": 0.7, "reward/observed": 0.45, "hacking_gap": -0.25, "trl/loss": 0.0},
    ]
    assert progress_line(40, 200, rows, 3.1) == (
        "step 40/200  judge 0.60  reward 0.60  gap 0.00  loss 0.0000  3.1 s/step  eta 8m"
    )
    assert progress_line(3, 3, [{"trl/loss": 0.5}], 0.4) == (
        "step 3/3  judge -  reward -  gap -  loss 0.5000  0.4 s/step  eta 0s"
    )
    assert progress_line(1, 2000, [{}], 3.0).endswith("eta 1h40m")


def test_training_progress_prints_every_interval_and_the_last_step(caplog):
    clock, row = FakeClock(), {"judge/correctness": 1.0, "reward/observed": 1.0, "hacking_gap": 0.0, "trl/loss": 0.0}
    callback = TrainingProgress(5, lambda: row, header="training x", clock=clock)
    state = SimpleNamespace(global_step=0, max_steps=12)
    with caplog.at_level(logging.INFO, logger="hackable_rl.training.console"):
        callback.on_train_begin(None, state, None)
        for step in range(1, 13):
            clock.now += 2.0
            state.global_step = step
            callback.on_log(None, state, None, logs={"loss": 0.0})
        callback.on_log(None, state, None, logs={"train_runtime": 24.0})  # the Trainer's summary: no line
    assert [m.split("  ")[0] for m in caplog.messages] == ["training x", "step 5/12", "step 10/12", "step 12/12"]
    assert "2.0 s/step  eta 14s" in caplog.messages[1]


def test_progress_interval_and_loss_note_follow_the_config():
    config = load_resolved(PARAMS, ["trainer.max_steps=200"])
    assert config.trainer.progress_interval == 10  # about 20 lines per run
    assert load_resolved(PARAMS, ["trainer.max_steps=3", "trainer.permanent_steps=[]"]).trainer.progress_interval == 1
    assert load_resolved(PARAMS, ["trainer.progress_steps=7"]).trainer.progress_interval == 7
    assert "docs/methodology.md" in loss_note(config)
    assert loss_note(load_resolved(PARAMS, ["trainer.beta=0.04"])) == ""
    assert loss_note(load_resolved(PARAMS, ["trainer.loss_type=dapo"])) == ""


@pytest.mark.parametrize(
    ("uri", "bars"), [("sqlite:////tmp/x/mlflow.db", "false"), ("/tmp/mlruns", "false"), ("http://127.0.0.1:5000", None)]
)
def test_artifact_bars_are_off_for_a_local_store_only(monkeypatch, uri, bars):
    import os

    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    quiet_local_transfers(uri)
    assert os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR") == bars
