"""GRPO training on the tiny model (CPU, seconds): records, MLflow, checkpoints, robust vs baseline,
resume after kill -9, an unreachable tracking store, and what the console shows."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from mlflow import MlflowClient

from hackable_rl.core.jsonl import append_jsonl, read_jsonl
from hackable_rl.extensions import load_resolved
from hackable_rl.tracking.store import tracking_uri
from hackable_rl.training.checkpoints import last_resumable
from hackable_rl.training.run import run_training

RECORD_FIELDS = {
    "step", "prompt_id", "prompt", "completion", "prompt_tokens", "completion_tokens", "strict_answer",
    "member.m0.clean_reward", "member.m0.clean_confidence", "member.m0.reward", "member.m0.confidence",
    "reward", "U", "normalised_disagreement", "vote_entropy", "confidence_dispersion", "optimised_reward",
    "format_tag_reward", "correctness_reward", "final_reward", "missing", "suppressed", "down_weighted",
    "advantage", "correct", "parsed", "reason",
}
STEP_METRICS = {
    "reward/observed", "reward/optimised", "judge/correctness", "hacking_gap", "verifier/disagreement",
    "verifier/missing", "verifier/suppressed", "verifier/down_weighted", "length/completion_tokens", "trl/loss",
}


def _records(run_dir: Path) -> list[dict]:
    return [row for path in sorted((run_dir / "generations").glob("step-*.jsonl")) for row in read_jsonl(path)]


def test_three_step_run_records_everything(project):
    config = load_resolved("params.yaml")
    result = run_training(config, metrics_out=project / "metrics")
    assert result.final_step == 3

    records = _records(result.run_dir)
    assert [r["step"] for r in records] == [1] * 8 + [2] * 8 + [3] * 8
    for record in records:
        assert RECORD_FIELDS <= set(record), RECORD_FIELDS - set(record)
        # the policy never sees the reference: it is not in the prompt text
        assert f"\\boxed{{{record['reference']}}}" not in record["prompt"]
        assert "=" not in record["prompt"].split("Problem:")[1]
    # advantages are centred within each group of num_generations completions
    for start in range(0, len(records), 4):
        assert abs(sum(r["advantage"] for r in records[start : start + 4])) < 1e-9

    rows = read_jsonl(result.run_dir / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert STEP_METRICS <= set(rows[0])
    assert json.loads((project / "metrics" / "train.json").read_text())["step"] == 3

    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    run = client.get_run(result.run_id)
    assert run.data.tags["method"] == "baseline" and run.data.tags["corruption.rate"] == "0.2"
    assert run.data.params["corruption.rate"] == "0.2"
    history = client.get_metric_history(result.run_id, "judge/correctness")
    assert sorted(point.step for point in history) == [1, 2, 3]
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "generations")}
    assert artifacts == {"generations/steps-00001-00050.json"}  # one table per block of 50 steps
    assert "final/judge/correctness/last" not in run.data.metrics  # summaries are no single-point charts
    assert "Training" in run.data.tags["mlflow.note.content"]
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["arith/train"]
    # each permanent checkpoint as artifacts, with the version it becomes once evaluated; no registry
    # version before an evaluation (`hackable-rl eval --run-id` registers what it evaluates)
    assert client.search_model_versions(f"run_id = '{result.run_id}'") == []
    listed = {a.path for a in client.list_artifacts(result.run_id, "checkpoints/permanent")}
    assert listed == {"checkpoints/permanent/step-2", "checkpoints/permanent/step-3"}
    version = json.loads(Path(client.download_artifacts(
        result.run_id, "checkpoints/permanent/step-3/version.json", str(project / "downloaded"))).read_text())
    assert version["model"] == "tests-policy-corrupted" and version["description"].startswith("Step 3 of run ")
    assert version["tags"]["step"] == "3" and version["tags"]["run_id"] == result.run_id
    assert str(project) not in json.dumps(version)  # relative paths only: the registry is read elsewhere
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["checkpoint_artifacts"] == {"2": "checkpoints/permanent/step-2", "3": "checkpoints/permanent/step-3"}
    # the exploit payoff table of this run's method and rate, saved before training (hackable-rl payoff)
    payoff = json.loads((result.run_dir / "payoff.json").read_text())
    assert payoff["cells"][0]["rate"] == 0.2 and "strict_wrong" in payoff["cells"][0]["pays"]
    assert "payoff.json" in {a.path for a in client.list_artifacts(result.run_id)}
    permanent = result.run_dir / "checkpoints" / "permanent" / "step-3"
    assert (permanent / "model.safetensors").exists() and (permanent / "checkpoint.json").exists()


def test_baseline_and_robust_differ_only_in_shaping(project):
    runs = {}
    for method in ("baseline", "robust"):
        config = load_resolved("params.yaml", [f"method={method}", "tracking.enabled=false", "trainer.max_steps=1",
                                                    "trainer.permanent_steps=[]"])
        runs[method] = _records(run_training(config).run_dir)
    baseline, robust = runs["baseline"], runs["robust"]
    # same seed, same first batch: identical prompts, completions and verifier verdicts ...
    for left, right in zip(baseline, robust, strict=True):
        for key in ("prompt", "completion", "reward", "member.m0.reward", "U", "correct"):
            assert left[key] == right[key]
        # ... and what is optimised is the aggregate for one and the shaped reward for the other, which
        # robust hands back with the aggregate it shaped (baseline computes neither)
        assert left["optimised_reward"] == left["reward"] and "shaped" not in left
        assert right["optimised_reward"] == right["shaped"] and right["robust_aggregate"] == right["reward"]


def test_lora_run_saves_an_adapter(project):
    config = load_resolved("params.yaml", ["lora.enabled=true", "lora.r=4", "tracking.enabled=false", "trainer.max_steps=1",
                                               "trainer.permanent_steps=[]"])
    result = run_training(config)
    assert (result.run_dir / "checkpoints" / "permanent" / "step-1" / "adapter_config.json").exists()


def _train_command(*extra: str) -> list[str]:
    """`train` with 4 steps unless `extra` sets its own (a key is given once on a command line)."""
    steps = [] if any(arg.startswith("trainer.max_steps=") for arg in extra) else ["--set", "trainer.max_steps=4"]
    return [sys.executable, "-m", "hackable_rl", "train", *steps, *extra]


def test_a_run_killed_after_its_last_checkpoint_resumes_without_a_step_past_max_steps(project):
    # the kill in the test below can land after step 4's checkpoint was saved and before the run was
    # marked finished: made deterministic here by completing a run and unmarking it
    run_dir = project / "cache" / "artifacts" / "runs" / "baseline-flip-r0.2-s0"
    subprocess.run(_train_command("--overwrite"), cwd=project, check=True, capture_output=True)
    assert (run_dir / "checkpoints").exists() and any(run_dir.rglob("checkpoint-4"))
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "status": "running"}))
    resumed = subprocess.run(_train_command("--resume", "auto"), cwd=project, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = [r["step"] for r in _records(run_dir)]
    assert steps == [1] * 8 + [2] * 8 + [3] * 8 + [4] * 8
    assert [row["step"] for row in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]


def test_resume_after_kill_has_no_duplicate_or_missing_steps(project):
    run_dir = project / "cache" / "artifacts" / "runs" / "baseline-flip-r0.2-s0"
    process = subprocess.Popen(_train_command(), cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    # kill -9 once step 3 (after checkpoint 2) has been recorded
    while not (run_dir / "generations" / "step-00003.jsonl").exists():
        assert process.poll() is None, "training ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.1)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    resumed = subprocess.run(_train_command("--resume", "auto"), cwd=project, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = [r["step"] for r in _records(run_dir)]
    assert steps == [1] * 8 + [2] * 8 + [3] * 8 + [4] * 8
    assert [row["step"] for row in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]

    info = json.loads((run_dir / "run.json").read_text())
    client = MlflowClient(tracking_uri(str(project / "cache")))
    history = client.get_metric_history(info["mlflow_run_id"], "judge/correctness")
    assert sorted(point.step for point in history) == [1, 2, 3, 4]


PROGRESS_LINE = re.compile(
    r"step (\d+)/12  judge (\d\.\d\d|-)  reward (\d\.\d\d|-)  gap (-?\d\.\d\d|-)  loss -?\d+\.\d{4}  "
    r"\d+\.\d s/step  eta \d+[smh]"
)


def test_the_console_shows_one_line_per_interval_and_no_warnings_or_trl_dicts(project):
    """What a user sees from `hackable-rl train` (a pipe, as under DVC): the progress lines, a few
    set-up and checkpoint lines; no Python warning, no TRL log dict, no progress-bar frames."""
    command = _train_command("--set", "trainer.max_steps=12", "--set", "trainer.progress_steps=4",
                             "--set", "trainer.save_steps=6")
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (result.stdout + result.stderr).splitlines()
    progress = [match for line in lines if (match := PROGRESS_LINE.search(line))]
    assert [int(match.group(1)) for match in progress] == [4, 8, 12]
    assert len(lines) <= len(progress) + 10, "\n".join(lines)  # set-up, header, checkpoints, summary
    console = "\n".join(lines)
    assert not re.search(r"\w+Warning\b", console), console
    assert "'loss'" not in console and "{'" not in console, console  # TRL's per-step dict
    assert "it/s" not in console and "\r" not in console, console  # tqdm frames
    assert "loss 0 by construction" in console  # said once, in the header
    run_dir = project / "cache" / "artifacts" / "runs" / "baseline-flip-r0.2-s0"
    assert [row["step"] for row in read_jsonl(run_dir / "metrics.jsonl")] == list(range(1, 13))  # every step


def test_unreachable_tracking_loses_nothing_and_syncs_later(project, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    config = load_resolved("params.yaml", ["trainer.max_steps=2"])
    result = run_training(config)
    info = json.loads((result.run_dir / "run.json").read_text())
    assert result.run_id is None and info["tracking_pending"] is True
    assert len(_records(result.run_dir)) == 16
    events = read_jsonl(result.run_dir / "tracking-events.jsonl")
    assert events and not any(event["delivered"] for event in events)

    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    from hackable_rl.tracking.sync import sync_run

    outcome = sync_run(config, result.run_dir)
    assert outcome["replayed"] == len(events) and outcome["pending"] == 0
    client = MlflowClient(tracking_uri(config.storage.cache_dir))
    history = client.get_metric_history(outcome["run_id"], "judge/correctness")
    assert sorted(point.step for point in history) == [1, 2]
    synced = json.loads((result.run_dir / "run.json").read_text())
    assert synced["mlflow_run_id"] == outcome["run_id"]
    assert synced["checkpoint_artifacts"] == {"2": "checkpoints/permanent/step-2"}  # delivered now, not registered
    assert client.search_model_versions(f"run_id = '{outcome['run_id']}'") == []
    assert sync_run(config, result.run_dir)["replayed"] == 0  # nothing is sent twice


def test_resume_skips_a_checkpoint_killed_while_saving(tmp_path):
    import torch
    from safetensors.torch import save_file

    resume = tmp_path / "checkpoints" / "resume"
    for step in (2, 4):
        (resume / f"checkpoint-{step}").mkdir(parents=True)
        save_file({"w": torch.zeros(2)}, resume / f"checkpoint-{step}" / "model.safetensors")
    (resume / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')  # checkpoint-4 was cut short

    checkpoint, step = last_resumable(tmp_path)

    assert (checkpoint, step) == (resume / "checkpoint-2", 2)
    assert not (resume / "checkpoint-4").exists()
    assert (tmp_path / "abandoned" / "resume" / "checkpoint-4" / "model.safetensors").exists()


def test_a_line_cut_by_a_kill_is_dropped_before_the_next_append(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1}\n{"step": 2, "loss": 0.')  # killed mid-write

    assert read_jsonl(log, torn_tail_ok=True) == [{"step": 1}]
    append_jsonl(log, [{"step": 2}])
    assert read_jsonl(log) == [{"step": 1}, {"step": 2}]


def test_tables_past_mlflows_tag_limit_become_plain_artifacts(tmp_path):
    """A run lists about a hundred tables in one tag (blocks of 50 steps keep a run far below it);
    past the limit a table stays a plain JSON artifact and every earlier one stays listed."""
    from hackable_rl.tracking.tracker import Tracker

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("tables", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    table = tmp_path / "step.jsonl"
    append_jsonl(table, [{"step": 1, "completion": "<think>1+1=2</think> \\boxed{2}", "member": {"a": 1.0}}])
    tracker = Tracker(client, run_id, tmp_path / "events.jsonl", "sqlite")
    for step in range(1, 201):  # 200 listed tables would overflow the 8,000-character tag
        tracker.log_table_files([table], f"generations/step-{step:05d}.json")

    assert tracker.online
    listed = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert 100 < len(listed) < 200
    assert {a.path for a in client.list_artifacts(run_id, "generations")} == {
        f"generations/step-{step:05d}.json" for step in range(1, 201)
    }
    last = json.loads((tmp_path / "artifacts" / run_id / "artifacts" / "generations" / "step-00200.json").read_text())
    assert last["columns"] == ["step", "completion", "member"] and last["data"][0][0] == 1


def test_a_table_sent_again_replaces_itself(tmp_path, monkeypatch):
    """Tables are written whole: a block re-sent after a resume (or by `sync`) has no duplicate rows,
    and an evaluation table keeps the rows of the other steps it holds."""
    from hackable_rl.tracking.tracker import Tracker

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")  # load_table searches there
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("tables", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    tracker = Tracker(client, run_id, None, "sqlite")
    rows = [{"step": 1, "x": 1}, {"step": 2, "x": 2}]
    tracker.log_table(rows, "generations/steps-00001-00050.json")
    tracker.log_table(rows, "generations/steps-00001-00050.json")
    tracker.log_table([{"step": 2, "x": 20}, {"step": 3, "x": 3}], "eval/samples.json")
    tracker.log_table([{"step": 3, "x": 30}], "eval/samples.json", keep_other_steps=True)

    frame = client.load_table(experiment, "generations/steps-00001-00050.json", run_ids=[run_id])
    assert frame["step"].tolist() == [1, 2]
    samples = client.load_table(experiment, "eval/samples.json", run_ids=[run_id])
    assert sorted(zip(samples["step"], samples["x"], strict=True)) == [(2, 20), (3, 30)]
