"""A disk that fills under a training run, for real: a tmpfs mounted as the runs folder (root mounts it;
where mounting is not permitted, a file-size limit, `ulimit -f`, stands in), too small for the run's
second resumable checkpoint. The run stops with one line naming the run folder, the free space and what a
checkpoint needs; its first checkpoint and the records before the failure are those an unfailed run
writes; once space is back, `--resume auto` ends with the same weights as a run that never failed."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.numpy import load_file

from hackable_rl.core.jsonl import read_jsonl

pytestmark = pytest.mark.faults
STEPS = 4


def _train(runs_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hackable_rl", "train", "--set", f"trainer.max_steps={STEPS}", "--set",
            "trainer.save_steps=1", "--set", "trainer.permanent_steps=[]", "--set", "tracking.enabled=false",
            "--set", f"storage.runs_dir={runs_dir}", "--set", "tracking.run_name=run", *extra]


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _weights(run_dir: Path) -> dict:
    folder = run_dir / "checkpoints" / "permanent" / f"step-{STEPS}"
    return {name: value.tobytes() for name, value in load_file(folder / "model.safetensors").items()}


def _mount(folder: Path, size: int) -> bool:
    folder.mkdir(parents=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def _file_size_limit(limit: int):
    def apply() -> None:  # in the child: writes past `limit` fail with EFBIG instead of a SIGXFSZ kill
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("fill", ["tmpfs", "file_size_limit"])
def test_a_full_disk_stops_the_run_in_one_line_keeps_what_it_wrote_and_resumes_once_space_is_back(
        project: Path, fill: str) -> None:
    whole_runs = project / "whole"
    whole = subprocess.run(_train(whole_runs), cwd=project, capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr[-2000:]
    checkpoints = sorted((whole_runs / "run").rglob("checkpoint-*"))  # the ones the rotation kept
    one_checkpoint = _size(checkpoints[0])

    full = project / "full"
    mounted = fill == "tmpfs" and _mount(full, int(one_checkpoint * 1.6))  # room for one checkpoint, not two
    if fill == "tmpfs" and not mounted:
        pytest.skip("mounting a tmpfs needs root here; the file-size limit stands in")
    # the limit: one byte short of the checkpoint's largest file, so even the first checkpoint cannot be written
    limit = None if mounted else max(path.stat().st_size for path in checkpoints[0].rglob("*") if path.is_file()) - 1
    try:
        failed = subprocess.run(_train(full), cwd=project, capture_output=True, text=True,
                                preexec_fn=None if mounted else _file_size_limit(limit))
        assert failed.returncode == 2, failed.stderr[-3000:]
        lines = [line for line in failed.stderr.splitlines() if line.startswith(("error:", "Traceback"))]
        assert len(lines) == 1 and lines[0].startswith(f"error: {full / 'run'}: no space left on its device ("), lines
        info = json.loads((full / "run" / "run.json").read_text())
        assert info["status"] in ("failed", "running")  # failed where the disk still took run.json
        if not mounted:
            assert lines[0].endswith("it has no resumable checkpoint yet: free space, then start it again with "
                                     "`hackable-rl train --overwrite`")
            assert f"files limited to {limit / 2**20:.1f} MB (`ulimit -f`)" in lines[0]
        if mounted:
            assert lines[0].endswith("its last resumable checkpoint (step 1) is intact: free space, then "
                                     "`hackable-rl train --resume auto`")
            done = [row["step"] for row in read_jsonl(full / "run" / "metrics.jsonl")]
            assert done and done == list(range(1, len(done) + 1))
            for step in done:  # every step recorded before the failure is the unfailed run's, byte for byte
                name = f"step-{step:05d}.jsonl"
                assert (full / "run" / "generations" / name).read_bytes() == (whole_runs / "run" / "generations" / name).read_bytes()
            subprocess.run(["mount", "-o", "remount,size=512m", str(full)], check=True)
        again = ["--resume", "auto"] if mounted else ["--overwrite"]
        resumed = subprocess.run(_train(full, *again), cwd=project, capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert [row["step"] for row in read_jsonl(full / "run" / "metrics.jsonl")] == list(range(1, STEPS + 1))
        assert _weights(full / "run") == _weights(whole_runs / "run")
    finally:
        if mounted:
            subprocess.run(["umount", str(full)], capture_output=True)
        shutil.rmtree(full, ignore_errors=True)
