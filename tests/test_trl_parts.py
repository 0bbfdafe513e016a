"""The parts for a user's own TRL script (hackable_rl.trl_parts): the reward against TRL's reward
contract, one-line errors for wrong arguments, and the example script end to end (MLflow traces,
the alarm's metric), in one process and under `accelerate launch` with two."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hackable_rl.trl_parts import GenerationTraceCallback, HackingAlarmCallback, judge, verifier_reward

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_trl_script.py"
RIGHT, WRONG = "<think>2+3=5</think> \\boxed{5}", "<think>2+3=6</think> \\boxed{6}"


def _call(reward, completions, **extra):
    """As TRL 1.16 calls a reward function: prompts, completions, completion_ids, every dataset column
    as a list, and its own trainer_state, log_extra and log_metric."""
    logged = {}
    rewards = reward(prompts=["2+3?"] * len(completions), completions=completions,
                     completion_ids=[[1, 2, 3]] * len(completions), reference=["5"] * len(completions),
                     trainer_state=None, log_extra=lambda column, values: logged.setdefault(column, values),
                     log_metric=lambda name, value: None, **extra)
    return rewards, logged


def test_the_reward_meets_trls_contract_with_plain_and_conversational_completions():
    reward = verifier_reward(members=["clean", "early_stop"], num_generations=2)
    plain, logged = _call(reward, [RIGHT, WRONG])
    assert plain == [1.0, 0.0] and all(isinstance(value, float) for value in plain)
    assert set(logged) == {"member_m0", "member_m1", "judge_correct"} and logged["judge_correct"] == [True, False]
    chat, _ = _call(reward, [[{"role": "assistant", "content": RIGHT}], [{"role": "assistant", "content": WRONG}]])
    assert chat == plain
    assert reward.__name__ == "verifier_reward"  # TRL's log column


def test_a_missing_verdict_is_none_and_a_flip_is_keyed_by_the_id_column():
    missing = verifier_reward(channel="missing", rate=1.0, num_generations=2)
    assert _call(missing, [RIGHT, WRONG])[0] == [None, None]
    flipped = verifier_reward(channel="flip", rate=0.5, num_generations=2)
    first = _call(flipped, [RIGHT, RIGHT], id=["a", "b"])[0]
    assert _call(flipped, [RIGHT, RIGHT], id=["a", "b"])[0] == first  # the same example, the same noise


@pytest.mark.parametrize(("build", "message"), [
    (lambda: verifier_reward(members=["clen"]), "verifier_reward: members[0].checker: unknown"),
    (lambda: verifier_reward(channel="flop", rate=0.2), "verifier_reward: channel: unknown"),
    (lambda: verifier_reward(channel="flip", rate=1.5), "verifier_reward: rate"),
    (lambda: verifier_reward(aggregation="avg"), "verifier_reward: aggregation"),
    (lambda: GenerationTraceCallback(lambda prompts, completions, **kw: [0.0]), "GenerationTraceCallback: reward must be"),
    (lambda: HackingAlarmCallback(verifier_reward(), votes=0), "HackingAlarmCallback: votes"),
])
def test_a_wrong_argument_is_one_line_naming_it_when_the_part_is_built(build, message):
    with pytest.raises(ValueError) as raised:
        build()
    text = str(raised.value)
    assert text.startswith(message) and "\n" not in text, text


def test_the_reward_names_a_missing_reference_column():
    with pytest.raises(ValueError, match="no column 'answer'"):
        _call(verifier_reward(reference_column="answer"), [RIGHT])


def test_the_judge_over_rows_is_the_clis_judge():
    judged = judge([{"completion": RIGHT, "reference": "5"}, {"completion": "5", "reference": "5"}])
    assert [row["correct"] for row in judged] == [True, False] and judged[1]["reason"]
    with pytest.raises(ValueError, match="judge: row 0: missing field 'reference'"):
        judge([{"completion": RIGHT}])


def _traces_and_alarm(store: Path) -> tuple[list, list[int]]:
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    assert all(e.tags.get("mlflow.experimentKind") == "custom_model_development" for e in client.search_experiments())
    run = client.search_runs(experiments)[0]
    mlflow.set_tracking_uri(f"sqlite:///{store}")
    traces = mlflow.search_traces(locations=experiments, return_type="list")
    return traces, [m.step for m in client.get_metric_history(run.info.run_id, "alarm")]


def _example(tiny_project: Path, tmp_path: Path, launcher: list[str]) -> Path:
    store = tmp_path / "mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [*launcher, str(EXAMPLE), "--model", str(tiny_project / "cache/models/tiny-arith-w0"),
               "--data", str(tiny_project / "cache/datasets/arith/train.jsonl"), "--steps", "3",
               "--out", str(tmp_path / "out")]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "right in the last step" in result.stdout
    return store


def test_the_example_script_traces_every_step_and_logs_the_alarm(tiny_project, tmp_path):
    from hackable_rl.tracking.traces import SPAN_ORDER

    traces, alarm_steps = _traces_and_alarm(_example(tiny_project, tmp_path, [sys.executable]))
    assert sorted(t.info.tags["mlflow.traceName"] for t in traces) == ["step 00001", "step 00002", "step 00003"]
    assert alarm_steps == [1, 2, 3]
    for trace in traces:
        spans = [span for span in trace.data.spans if "#" in span.name]
        assert len(spans) == 8 and all("m0" in span.outputs["members"] for span in spans)
        verdicts = [span.name.split(" #")[0] for span in spans]
        assert verdicts == sorted(verdicts, key=SPAN_ORDER.index)  # the hack first under each step


@pytest.mark.skipif(shutil.which("accelerate") is None and not Path(sys.executable).with_name("accelerate").exists(),
                    reason="accelerate's launcher is not installed")
def test_the_example_under_accelerate_launch_with_two_processes_logs_once(tiny_project, tmp_path):
    # --multi_gpu starts the workers through torchrun; on CPU they join over gloo (use_cpu=True in the script)
    launcher = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"]
    traces, alarm_steps = _traces_and_alarm(_example(tiny_project, tmp_path, launcher))
    assert sorted(t.info.tags["mlflow.traceName"] for t in traces) == ["step 00001", "step 00002", "step 00003"]
    assert alarm_steps == [1, 2, 3]  # once per step: the main process only
    assert all(len([s for s in t.data.spans if "#" in s.name]) == 16 for t in traces)  # both processes' completions


def test_a_callback_on_a_trainer_that_is_not_grpo_or_without_mlflow_refuses_before_the_first_step():
    from types import SimpleNamespace

    from transformers import TrainerControl, TrainerState

    reward, state = verifier_reward(), TrainerState()
    plain_args = SimpleNamespace(report_to=["mlflow"], world_size=1)  # a Trainer's args: no num_generations
    with pytest.raises(ValueError, match="GenerationTraceCallback: the trainer is not a GRPOTrainer"):
        GenerationTraceCallback(reward).on_train_begin(plain_args, state, TrainerControl())
    grpo_args = SimpleNamespace(report_to=[], world_size=1, num_generations=4, scale_rewards="group")
    with pytest.raises(ValueError, match='MLflow is not configured; pass report_to="mlflow"'):
        GenerationTraceCallback(reward).on_train_begin(grpo_args, state, TrainerControl())
    two = SimpleNamespace(report_to=["mlflow"], world_size=2, num_generations=4, scale_rewards="group")
    with pytest.raises(ValueError, match="stop_training=True works in one process only"):
        HackingAlarmCallback(reward, stop_training=True).on_train_begin(two, state, TrainerControl())
