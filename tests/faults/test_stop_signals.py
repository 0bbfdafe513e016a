"""SIGTERM and SIGINT during a training step (`training.stop_signal`), for real on the tiny policy: the
step ends, a resumable checkpoint is saved at it, the run is marked stopped, one line says how to resume
and the exit code is the signal's (143, 130); `--resume auto` then ends where an uninterrupted run ends,
the same records and the same weights."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.numpy import load_file

from hackable_rl.core.jsonl import read_jsonl

pytestmark = pytest.mark.faults
STEPS = 5


def _train(*extra: str) -> list[str]:
    return [sys.executable, "-m", "hackable_rl", "train", "--set", f"trainer.max_steps={STEPS}", "--set",
            "trainer.save_steps=100", "--set", "tracking.enabled=false", *extra]


def _weights(run_dir: Path) -> dict:
    folder = run_dir / "checkpoints" / "permanent" / f"step-{STEPS}"
    return {name: value.tobytes() for name, value in load_file(folder / "model.safetensors").items()}


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_run_stops_at_the_steps_end_resumably_and_the_resume_matches_an_unstopped_run(
        project: Path, sent: signal.Signals, code: int) -> None:
    runs = project / "cache" / "artifacts" / "runs"
    whole = subprocess.run(_train("--set", "tracking.run_name=whole"), cwd=project, capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr[-2000:]

    process = subprocess.Popen(_train("--set", "tracking.run_name=stopped"), cwd=project, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not (runs / "stopped" / "generations" / "step-00002.jsonl").exists():
        assert process.poll() is None and time.time() < deadline, "training ended before the signal"
        time.sleep(0.05)
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == code, stderr[-2000:]
    info = json.loads((runs / "stopped" / "run.json").read_text())
    step = info["stopped_at_step"]
    assert info["status"] == "stopped" and info["stopped_by"] == sent.name and 2 <= step < STEPS
    lines = [line for line in stderr.splitlines() if line.startswith(("stopped:", "error:", "Traceback"))]
    assert lines == [f"stopped: {runs / 'stopped'}: stopped by {sent.name} after step {step} of {STEPS}, with a "
                     "resumable checkpoint there; continue with `hackable-rl train --resume auto` (the same config)"]
    assert any(path.name == f"checkpoint-{step}" for path in (runs / "stopped").rglob("checkpoint-*"))

    resumed = subprocess.run(_train("--set", "tracking.run_name=stopped", "--resume", "auto"), cwd=project,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [row["step"] for row in read_jsonl(runs / "stopped" / "metrics.jsonl")] == list(range(1, STEPS + 1))
    for number in range(1, STEPS + 1):  # every step's generation records, once, as the whole run wrote them
        name = f"step-{number:05d}.jsonl"
        stopped_rows = [(r["prompt"], r["completion"]) for r in read_jsonl(runs / "stopped" / "generations" / name)]
        whole_rows = [(r["prompt"], r["completion"]) for r in read_jsonl(runs / "whole" / "generations" / name)]
        assert stopped_rows == whole_rows, name
    assert _weights(runs / "stopped") == _weights(runs / "whole")
    assert json.loads((runs / "stopped" / "run.json").read_text())["status"] == "finished"
