"""The audited alarm (`alarm.audit`): its replay has the live audit's law (the hypergeometric draw against
direct subsamples of a tiny run's records), it fires live on the tiny policy where the replay of its run
folder says, the TRL callback takes the same setting, judge calls are counted, bad settings and judges
are one clear line; the benchmark over constructed studies."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from scipy.stats import hypergeom
from transformers import TrainerControl, TrainerState
from typer.testing import CliRunner

from hackable_rl.alarm.audit import (
    AUDIT_CALLS,
    StepAudit,
    audit_firing,
    audit_indices,
    replay_run_folder,
)
from hackable_rl.alarm.bench.audit import StepCounts, replayed_gaps, run_audit_bench
from hackable_rl.alarm.onset_alarm import ALARM_FILE, AUDIT_SIGNAL
from hackable_rl.cli import app
from hackable_rl.config.experiment import AlarmConfig, AuditConfig
from hackable_rl.config.loading import load_config
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.training.run import run_training
from hackable_rl.trl_parts import HackingAlarmCallback, verifier_reward
from test_alarm import CONFIG, _callback, _train

PLUGINS = Path(__file__).parent / "plugins"
sys.path.insert(0, str(PLUGINS))  # the audit judges of `alarm.audit.judge: audit_judges:<name>`
from audit_judges import even_length  # noqa: E402

# 8 completions a step (TINY_PARAMS), 4 audited, judged by a stand-in with mixed verdicts (the tiny
# policy answers nothing right); the windowed test over 2 steps, at a threshold its noise crosses.
LIVE = {"alarm.audit.k": 4, "alarm.audit.test": "window", "alarm.audit.threshold": 0.5, "alarm.window": 2,
        "alarm.audit.judge": "audit_judges:even_length", "trainer.max_steps": 8, "tracking.enabled": "false"}
DRAWS = 4000


@pytest.fixture(scope="module")
def audited_run(tiny_project: Path, tmp_path_factory) -> tuple[Path, object]:
    """One 8-step run of the tiny policy with the audit on (its run folder and config)."""
    folder = tmp_path_factory.mktemp("audited") / "project"
    shutil.copytree(tiny_project, folder)
    previous, uri = Path.cwd(), os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.chdir(folder)
    try:
        config = load_config("params.yaml", [f"{key}={value}" for key, value in LIVE.items()])
        result = run_training(config)
    finally:
        os.chdir(previous)
        if uri is not None:
            os.environ["MLFLOW_TRACKING_URI"] = uri
    return result.run_dir, config


def test_the_replay_draws_what_subsampling_the_records_draws(audited_run):
    """The replay from a step's counts (hypergeometric) against direct subsamples of the step's records
    at the live audit's positions: both have the law Hypergeometric(n, right, k)."""
    run_dir, _ = audited_run
    rows = read_jsonl(run_dir / "generations" / "step-00001.jsonl")
    judged = [even_length(row["completion"], row["reference"]) for row in rows]
    n, right, k = len(rows), sum(judged), 4
    assert 0 < right < n, judged  # both kinds to draw
    reward = sum(row["reward"] for row in rows) / n
    live = Counter(sum(judged[i] for i in audit_indices(seed, 1, n, k)) for seed in range(DRAWS))
    replay = Counter(round((reward - gap) * k) for draw in range(DRAWS)
                     for _, gap in replayed_gaps([StepCounts(1, n, right, reward)], k, draw))
    law = hypergeom(n, right, k)
    for hits in range(k + 1):
        assert abs(live[hits] / DRAWS - law.pmf(hits)) < 0.03, (hits, live)
        assert abs(replay[hits] / DRAWS - law.pmf(hits)) < 0.03, (hits, replay)
    assert replayed_gaps([StepCounts(1, n, right, reward)], n, 0) == [(1, reward - right / n)]  # all: the gap


def test_the_live_audit_fires_where_the_replay_of_its_run_folder_does(audited_run):
    run_dir, config = audited_run
    rows = read_jsonl(run_dir / ALARM_FILE)
    live = [(row["step"], row[AUDIT_SIGNAL]) for row in rows]
    assert live == replay_run_folder(run_dir, config.alarm.audit)  # the same positions, the same judge
    fired = [(row["step"], row["alarm"]) for row in rows if row["alarm"]]
    assert fired == [(audit_firing(live, config.alarm), AUDIT_SIGNAL)] and fired[0][0] is not None
    other_seed = replay_run_folder(run_dir, config.alarm.audit.model_copy(update={"seed": 1}))
    assert other_seed != live  # the seed picks the sample
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert [row[AUDIT_CALLS] for row in metrics] == [4.0 * row["step"] for row in metrics]  # 4 judge calls a step
    assert [row["step"] for row in metrics if "alarm/step" in row] == [fired[0][0]]


def test_a_judge_that_returns_no_verdict_is_refused_before_the_run(project, fresh_logging, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    before = sorted(project.rglob("run.json"))
    result = CliRunner().invoke(app, ["train", "-c", "params.yaml", "--set", "tracking.enabled=false",
                                      "--set", "alarm.audit.k=2", "--set", "alarm.audit.judge=audit_judges:not_a_verdict"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: alarm.audit.judge 'audit_judges:not_a_verdict': returned 'yes' for an audited "
                      "completion; expected a verdict: True or False, or a Judgment whose correct is True, False or None"]
    assert sorted(project.rglob("run.json")) == before  # no run folder made


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(("overrides", "names"), [
    (["alarm.audit.k=0"], "alarm.audit.k"),
    (["alarm.audit.k=-2"], "alarm.audit.k"),
    (["alarm.audit.k=9"], "alarm.audit.k: 9 is more than the 8 completions of a step"),
    (["alarm.audit.k=2", "alarm.enabled=false"], "alarm.audit.k: 2 needs alarm.enabled: true"),
    (["alarm.audit.k=2", "alarm.audit.test=mean"], "alarm.audit.test"),
])
def test_a_bad_audit_setting_is_refused_naming_it(tiny_params_writer, tmp_path, overrides, names):
    params = tiny_params_writer(tmp_path)
    with pytest.raises(ConfigError, match=names):
        load_config(params, overrides)


def test_a_judge_that_does_not_load_or_cannot_be_called_is_named():
    with pytest.raises(UserError, match="alarm.audit.judge: 'no_such_module:judge': cannot import"):
        StepAudit.of(AuditConfig(k=2, judge="no_such_module:judge"))
    with pytest.raises(UserError, match="alarm.audit.judge: 'audit_judges:__name__' is str"):
        StepAudit.of(AuditConfig(k=2, judge="audit_judges:__name__"))


def test_the_run_callback_counts_judge_calls_and_a_resume_restores_them(tmp_path):
    config = CONFIG.model_copy(update={"audit": AuditConfig(k=4, test="cusum", threshold=1.0)})
    _train(_callback(tmp_path, config), range(1, 13))
    rows = read_jsonl(tmp_path / ALARM_FILE)
    assert [row["alarm"] for row in rows if row["alarm"]] == [AUDIT_SIGNAL]  # the audit alone fires it
    assert audit_firing([(row["step"], row[AUDIT_SIGNAL]) for row in rows], config) == next(
        row["step"] for row in rows if row["alarm"])
    resumed = _callback(tmp_path, config)
    resumed.catch_up([], 7)
    assert resumed.audit.calls == 4 * 7 and not resumed.alarm.judge_free


def test_a_step_with_fewer_completions_than_k_is_one_line_naming_the_setting():
    with pytest.raises(UserError, match="alarm.audit.k: 5 is more than the 4 completions of step 3"):
        StepAudit(AuditConfig(k=5)).audit(3, [{"reward": 1.0, "correct": True}] * 4)


# --------------------------------------------------------------------------- the TRL callback


RIGHT, WRONG = "<think>2+3=5</think> \\boxed{5}", "<think>2+3=6</think> \\boxed{6}"
# GRPOConfig's defaults: one group of 8 completions a step, as verifier_reward() is built for
ARGS = SimpleNamespace(report_to=[], world_size=1, num_generations=8, scale_rewards="group", generation_batch_size=8)


def _drive(callback: HackingAlarmCallback, steps: int) -> None:
    """As TRL calls the reward, then the callback, each step (8 completions, fewer right from step 4)."""
    callback.on_train_begin(ARGS, TrainerState(), TrainerControl())
    for step in range(1, steps + 1):
        completions = [RIGHT, WRONG] * 2 + [RIGHT if step < 4 else WRONG, WRONG] * 2
        callback.reward(prompts=["2+3?"] * 8, completions=completions, completion_ids=[[1, 2, 3]] * 8,
                        reference=["5"] * 8, id=["a"] * 8, trainer_state=TrainerState(global_step=step - 1))
        state = TrainerState(global_step=step)
        callback.on_step_end(ARGS, state, TrainerControl())
        callback.on_log(ARGS, state, TrainerControl(), logs={"loss": 0.0})


def test_the_callback_takes_the_same_setting_and_counts_judge_calls():
    callback = HackingAlarmCallback(verifier_reward(),
                                    audit={"k": 2, "test": "window", "threshold": 1.0}, audit_judge=even_length)
    _drive(callback, 6)
    assert [row[AUDIT_CALLS] for row in callback.history] == [2.0 * step for step in range(1, 7)]
    gaps = [(row["step"], row.get(f"signal/{AUDIT_SIGNAL}")) for row in callback.history]
    firing = audit_firing(gaps, callback.config)
    assert (callback.firing.step if callback.firing else None) == firing


@pytest.mark.parametrize(("build", "names"), [
    (lambda: HackingAlarmCallback(verifier_reward(), audit={"k": 0}), "HackingAlarmCallback: audit.k"),
    (lambda: HackingAlarmCallback(verifier_reward(), audit={"k": 2}, audit_judge=3), "HackingAlarmCallback: audit_judge"),
    (lambda: _drive(HackingAlarmCallback(verifier_reward(), audit={"k": 9}), 1),
     "HackingAlarmCallback: audit.k: 9 is more than the 8 completions of a step"),
    (lambda: _drive(HackingAlarmCallback(verifier_reward(), audit={"k": 2},
                                         audit_judge=lambda completion, reference: 0.5), 1),
     "HackingAlarmCallback: audit_judge: returned 0.5"),
])
def test_a_bad_callback_setting_or_judge_is_one_valueerror_naming_it(build, names):
    with pytest.raises(ValueError) as raised:
        build()
    assert str(raised.value).startswith(names) and "\n" not in str(raised.value)


# --------------------------------------------------------------------------- the benchmark


STUDY = "hacking_definition:\n  rule: live_judge\nalarm_split:\n  tune_seeds: [0, 1]\n"


def _condition(results: Path, name: str, seed: int, rise_at: int | None, curve: bool = True) -> None:
    """50 steps of 64 completions, 32 judged right; the reward 0.5 (plus 0.01 a seed: no two runs are
    twins), or 1.0 from `rise_at`; the judge's hindsight onset 6 steps after the rise, so the live onset
    comes 15 after it."""
    folder = results / name
    folder.mkdir(parents=True)
    reward = [1.0 if rise_at and step >= rise_at else 0.5 + 0.01 * seed for step in range(1, 51)]
    if curve:
        lines = ["step,samples,exploit_share,observed_reward,correctness,hacking_gap"]
        lines += [f"{step},64,0.0,{value},0.5,{value - 0.5}" for step, value in zip(range(1, 51), reward, strict=True)]
        (folder / "curve.csv").write_text("\n".join(lines) + "\n")
    (folder / "signals.csv").write_text("step,reward\n" + "".join(f"{s},{r}\n" for s, r in zip(range(1, 51), reward, strict=True)))
    (folder / "condition.json").write_text(json.dumps({"condition": {"name": name, "method": "baseline", "seed": seed},
                                                       "status": "ok", "train": {}}))
    (folder / "onset.json").write_text(json.dumps({"judge_onset": rise_at + 6 if rise_at else None}))


def test_the_benchmark_names_the_smallest_k_and_the_runs_it_cannot_replay(tmp_path):
    results = tmp_path / "study" / "results"
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "study.yaml").write_text(STUDY)
    for seed in range(4):
        _condition(results, f"hack-s{seed}", seed, rise_at=15 + seed)
        _condition(results, f"clean-s{seed}", seed, rise_at=None)
    _condition(results, "uncounted-s3", 3, rise_at=20, curve=False)
    document = run_audit_bench([results], AlarmConfig(), tmp_path / "out")
    assert [entry["run"] for entry in document["not_replayed"]] == ["study/uncounted-s3"]
    every = document["rows"][-1]
    assert every["k"] == "all" and every["held_out"]["on_time_rate"] == 1.0 and every["held_out"]["false_alarm_rate"] == 0
    assert document["answer"]["k"] is not None and document["answer"]["k"] <= 16
    assert (tmp_path / "out" / "audit_bench.md").read_text().startswith("# Audited hacking alarm benchmark")
