"""The parts for a user's own TRL script (hackable_rl.trl_parts): the reward against TRL's reward
contract, one-line errors for wrong arguments, and the example script end to end (MLflow traces,
the alarm's metric), in one process and under `accelerate launch` with two."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hackable_rl.trl_parts import GenerationTraceCallback, HackingAlarmCallback, judge, verifier_reward

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_trl_script.py"
RIGHT, WRONG = "<think>2+3=5</think> \\boxed{5}", "<think>2+3=6</think> \\boxed{6}"


def _grpo(num_generations: int, scale_rewards: str = "group", **more) -> SimpleNamespace:
    """The GRPOConfig fields the parts read (a real GRPOConfig in the example script's tests)."""
    return SimpleNamespace(num_generations=num_generations, scale_rewards=scale_rewards, **more)


def _call(reward, completions, prompts=None, trainer_state=None, **extra):
    """As TRL 1.16 calls a reward function: prompts, completions, completion_ids, every dataset column
    as a list, and its own trainer_state, log_extra and log_metric."""
    logged = {}
    rewards = reward(prompts=prompts or ["2+3?"] * len(completions), completions=completions,
                     completion_ids=[[1, 2, 3]] * len(completions), reference=["5"] * len(completions),
                     trainer_state=trainer_state, log_extra=lambda column, values: logged.setdefault(column, values),
                     log_metric=lambda name, value: None, **extra)
    return rewards, logged


def test_the_reward_meets_trls_contract_with_plain_and_conversational_completions():
    reward = verifier_reward(members=["clean", "early_stop"], args=_grpo(2))
    plain, logged = _call(reward, [RIGHT, WRONG])
    assert plain == [1.0, 0.0] and all(isinstance(value, float) for value in plain)
    assert set(logged) == {"member_m0", "member_m1", "judge_correct"} and logged["judge_correct"] == [True, False]
    chat, _ = _call(reward, [[{"role": "assistant", "content": RIGHT}], [{"role": "assistant", "content": WRONG}]])
    assert chat == plain
    assert reward.__name__ == "verifier_reward"  # TRL's log column


def test_a_missing_verdict_is_none_and_a_flip_is_keyed_by_the_id_column():
    missing = verifier_reward(channel="missing", rate=1.0, args=_grpo(2))
    assert _call(missing, [RIGHT, WRONG])[0] == [None, None]
    flipped = verifier_reward(channel="flip", rate=0.5, args=_grpo(2))
    first = _call(flipped, [RIGHT, RIGHT], id=["a", "b"])[0]
    assert _call(flipped, [RIGHT, RIGHT], id=["a", "b"])[0] == first  # the same example, the same noise


@pytest.mark.parametrize(("build", "message"), [
    (lambda: verifier_reward(members=["clen"]), "verifier_reward: members[0].checker: unknown"),
    (lambda: verifier_reward(channel="flop", rate=0.2), "verifier_reward: channel: unknown"),
    (lambda: verifier_reward(channel="flip", rate=1.5), "verifier_reward: rate"),
    (lambda: verifier_reward(aggregation="avg"), "verifier_reward: aggregation"),
    (lambda: GenerationTraceCallback(lambda prompts, completions, **kw: [0.0]), "GenerationTraceCallback: reward must be"),
    (lambda: HackingAlarmCallback(verifier_reward(), votes=0), "HackingAlarmCallback: votes"),
    (lambda: verifier_reward(args=_grpo(1)), "verifier_reward: args.num_generations"),
    (lambda: verifier_reward(args={"num_generations": 4}), "verifier_reward: args must be the trainer's GRPOConfig"),
])
def test_a_wrong_argument_is_one_line_naming_it_when_the_part_is_built(build, message):
    with pytest.raises(ValueError) as raised:
        build()
    text = str(raised.value)
    assert text.startswith(message) and "\n" not in text, text


def test_the_group_size_is_set_in_one_place_the_grpo_config():
    reward = verifier_reward(args=_grpo(4, "none"))
    assert reward.group_size == 4 and verifier_reward().group_size == 8  # GRPOConfig's default
    with pytest.raises(ValueError, match=r"built for num_generations=4, scale_rewards='none', but the trainer's "
                                         r"GRPOConfig has 2 and 'group'; build it with verifier_reward\(\.\.\., args="):
        reward.bind(_grpo(2))
    reward.bind(_grpo(4, False))  # TRL's False is "none"
    with pytest.raises(ValueError, match="built for num_generations=4, but the trainer's groups are smaller"):
        _call(reward, [RIGHT] * 4, prompts=["2+3?", "2+3?", "4+1?", "4+1?"])


def test_the_last_steps_records_are_public_and_stamped_with_the_step_trl_computes():
    reward = verifier_reward(args=_grpo(2))
    assert reward.last_step is None and reward.last_step_records() == []
    _call(reward, [RIGHT, WRONG], trainer_state=SimpleNamespace(global_step=4))
    _call(reward, [WRONG, WRONG], trainer_state=SimpleNamespace(global_step=4))  # a second call of step 5
    assert reward.last_step == 5
    records = reward.last_step_records()
    assert [r.completion for r in records] == [RIGHT, WRONG, WRONG, WRONG] and {r.step for r in records} == {5}
    assert [r.judgment.correct for r in records] == [True, False, False, False]
    _call(reward, [RIGHT, RIGHT], trainer_state=SimpleNamespace(global_step=5))
    assert reward.last_step == 6 and len(reward.last_step_records()) == 2  # only the latest step is kept


@pytest.mark.parametrize(("environment", "warned"), [({}, True), ({"ATEN_CPU_CAPABILITY": "avx2"}, False)])
def test_importing_the_parts_after_torch_says_in_one_line_what_to_change(environment, warned):
    from hackable_rl.core.numerics import cpu_has_flag

    if warned and not cpu_has_flag("avx512f"):
        pytest.skip("this CPU runs AVX2 kernels anyway: torch first changes no number here")
    env = {key: value for key, value in os.environ.items() if key != "ATEN_CPU_CAPABILITY"} | environment
    result = subprocess.run([sys.executable, "-c", "import torch; import hackable_rl.trl_parts"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "hackable_rl.trl_parts:" in line]
    if warned:
        assert len(lines) == 1 and "import hackable_rl before torch" in lines[0], result.stderr
        assert "ATEN_CPU_CAPABILITY=avx2" in lines[0]
    else:
        assert lines == [], result.stderr


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
    steps = [t for t in traces if "#" not in t.info.tags["mlflow.traceName"]]
    completions = [t for t in traces if "#" in t.info.tags["mlflow.traceName"]]
    for trace in completions:  # each completion's verdicts as assessments, the step's trace counting the hacks
        assert {"judge", "verifier", "verifier.m0", "reference"} <= {a.name for a in trace.info.assessments}
    assert all(a.name == "paid_but_wrong" for t in steps for a in t.info.assessments)
    assert len(completions) == sum(len([s for s in t.data.spans if "#" in s.name]) for t in steps)
    return steps, [m.step for m in client.get_metric_history(run.info.run_id, "alarm")]


def _example(tiny_project: Path, tmp_path: Path, launcher: list[str], completions: int = 8) -> Path:
    store = tmp_path / "mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [*launcher, str(EXAMPLE), "--model", str(tiny_project / "cache/models/tiny-arith-w0"),
               "--data", str(tiny_project / "cache/datasets/arith/train.jsonl"), "--steps", "3",
               "--out", str(tmp_path / "out")]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"of {completions} right in the last step (step 3)" in result.stdout, result.stdout
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
    traces, alarm_steps = _traces_and_alarm(_example(tiny_project, tmp_path, launcher, completions=16))
    assert sorted(t.info.tags["mlflow.traceName"] for t in traces) == ["step 00001", "step 00002", "step 00003"]
    assert alarm_steps == [1, 2, 3]  # once per step: the main process only
    assert all(len([s for s in t.data.spans if "#" in s.name]) == 16 for t in traces)  # both processes' completions


def test_a_callback_on_a_trainer_that_is_not_grpo_or_without_mlflow_refuses_before_the_first_step():
    from transformers import TrainerControl, TrainerState

    reward, state = verifier_reward(args=_grpo(4)), TrainerState()
    plain_args = SimpleNamespace(report_to=["mlflow"], world_size=1)  # a Trainer's args: no num_generations
    with pytest.raises(ValueError, match="GenerationTraceCallback: the trainer is not a GRPOTrainer"):
        GenerationTraceCallback(reward).on_train_begin(plain_args, state, TrainerControl())
    grpo_args = _grpo(4, report_to=[], world_size=1)
    with pytest.raises(ValueError, match='MLflow is not configured; pass report_to="mlflow"'):
        GenerationTraceCallback(reward).on_train_begin(grpo_args, state, TrainerControl())
    two = _grpo(4, report_to=["mlflow"], world_size=2)
    with pytest.raises(ValueError, match="stop_training=True works in one process only"):
        HackingAlarmCallback(reward, stop_training=True).on_train_begin(two, state, TrainerControl())
