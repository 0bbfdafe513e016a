"""hackable-rl's parts for your own TRL script (docs/own-trl-script.md): no config file, no CLI.

    args = GRPOConfig(..., num_generations=4, report_to="mlflow")          # the group size: set here only
    reward = verifier_reward(members=["clean"], channel="flip", rate=0.4, args=args)  # TRL's reward contract
    trainer = GRPOTrainer(model, reward_funcs=[reward], args=args,
                          callbacks=[GenerationTraceCallback(reward), HackingAlarmCallback(reward)])
    reward.last_step_records()                                                # the latest step's records
    judge([{"completion": ..., "reference": ...}])                            # the independent judge

Each part is built from the same code the `hackable-rl` CLI runs, not a copy of it: `verifier_reward`
builds the project's reward pipeline (`reward.pipeline`) from keyword arguments validated by the
project's config schema, and the training reward over it (`reward.pipeline.ObjectiveReward.of`, as
`hackable-rl train` does), which scores, computes GRPO's advantages and judges every completion into
a generation record;
`GenerationTraceCallback` writes each step's records as the MLflow trace `hackable-rl train` writes
(`tracking.traces`); `HackingAlarmCallback` feeds them to the onset alarm (`training.signals`,
`training.alarm`); `judge` is `hackable-rl judge`'s judge. A wrong argument is one ValueError naming
it, raised when the part is built.

Import it before torch, transformers and TRL: `hackable_rl` pins PyTorch's CPU kernels before torch loads,
so the numbers match `hackable-rl train`'s on every x86 CPU (`core.numerics`); imported after torch on a CPU
where that changes them, it warns in one line saying what to change.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from transformers import TrainerCallback

from hackable_rl.answers.parsing import completion_text
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.core.numerics import dispatch_mismatch
from hackable_rl.evaluation.judge import JudgeOptions, judge_records
from hackable_rl.extensions import resolve_config
from hackable_rl.reward.pipeline import ObjectiveReward, RewardPipeline, build_reward_pipeline
from hackable_rl.reward.records import GenerationRecord
from hackable_rl.training.latest_step import LatestStep

__all__ = ["GenerationTraceCallback", "HackingAlarmCallback", "VerifierReward", "judge", "verifier_reward"]

log = logging.getLogger(__name__)

if (_mismatch := dispatch_mismatch()) is not None:  # torch came first: say what to change, once, in one line
    warnings.warn(f"hackable_rl.trl_parts: {_mismatch}", RuntimeWarning, stacklevel=2)

# where a config error's field comes from: the keyword argument that set it
_ARGUMENTS = {"verifier.members": "members", "verifier.aggregation": "aggregation", "corruption.channel": "channel",
              "corruption.rate": "rate", "corruption.kwargs": "channel_kwargs", "method_kwargs": "method_kwargs",
              "method": "method", "seed": "seed", "rewards": "rel_tol", "evaluation.extract": "extract",
              "trainer.num_generations": "args.num_generations", "trainer.scale_rewards": "args.scale_rewards"}


class VerifierReward:
    """A reward function of TRL's contract: per-completion floats, None where the training verifier
    has no verdict (TRL then ignores it). Every call also keeps one generation record per completion
    (member verdicts, aggregate, advantage, judge) for the callbacks, and logs the members' verdicts
    as extra completion columns where TRL offers `log_extra`."""

    def __init__(self, pipeline: RewardPipeline, judge_options: JudgeOptions, reference_column: str):
        self.pipeline = pipeline
        self.reference_column = reference_column
        self._latest = LatestStep()
        self._objective = ObjectiveReward.of(pipeline, self._latest, judge_options.judge, count_tokens=lambda text: None)
        self.__name__ = "verifier_reward"  # TRL names the reward's log column after it

    @property
    def group_size(self) -> int:
        """GRPO's group size (the GRPOConfig's `num_generations`) the records' advantages use."""
        return self._objective.group_size

    @property
    def last_step(self) -> int | None:
        """The training step the latest records belong to (None before the first call, or for a call
        made outside a trainer)."""
        return self._latest.step

    def last_step_records(self) -> list[GenerationRecord]:
        """The latest step's generation records, one per completion (every process's, on the main one):
        prompt, completion, reference, the verifier's verdicts (`.verifier`), GRPO's `advantage` and the
        judge's (`.judgment.correct`); `record.to_json()` gives the flat form the CLI writes."""
        return list(self._latest.records)

    def bind(self, args: Any, tokenizer: Any = None) -> None:
        """Checks that the trainer's GRPOConfig has the group size and reward scaling the reward was
        built with (the callbacks do this at the start of training), and takes the tokenizer that
        counts prompt tokens."""
        found = (int(args.num_generations), _scaling(args.scale_rewards))
        built = (self._objective.group_size, self._objective.scale_rewards)
        if found != built:
            raise ValueError(f"verifier_reward: built for num_generations={built[0]}, scale_rewards={built[1]!r}, but "
                             f"the trainer's GRPOConfig has {found[0]} and {found[1]!r}; build it with "
                             "verifier_reward(..., args=<that GRPOConfig>)")
        if tokenizer is not None:
            self._objective.count_tokens = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, prompts: list[Any], completions: list[Any], completion_ids: list[list[int]] | None = None,
                 log_extra: Any = None, trainer_state: Any = None, **columns: Any) -> list[float | None]:
        if self.reference_column not in columns:
            raise ValueError(f"verifier_reward: the dataset has no column {self.reference_column!r} (the reference "
                             f"answer); columns: {', '.join(sorted(columns)) or 'none'}; pass reference_column=")
        texts = [_prompt_text(prompt) for prompt in prompts]
        _check_groups(texts, self.group_size)
        # TRL computes step global_step + 1 while it scores (the step counter moves when the step ends)
        self._latest.begin(None if trainer_state is None else trainer_state.global_step + 1)
        ids = [str(value) for value in columns["id"]] if "id" in columns else [_prompt_id(text) for text in texts]
        metadata = columns.get("metadata_json") or [json.dumps(m or {}) for m in columns.get("metadata") or [{}] * len(texts)]
        rewards = self._objective(texts, [completion_text(c) for c in completions], completion_ids, id=ids,
                                  reference=[str(value) for value in columns[self.reference_column]],
                                  metadata_json=list(metadata))
        records = self._objective.last_records
        if log_extra is not None:
            _log_verdicts(log_extra, records)
        return [None if record.verifier.missing else reward for reward, record in zip(rewards, records, strict=True)]


def _check_groups(prompts: list[str], group_size: int) -> None:
    """TRL's completions come in groups of `num_generations` sharing a prompt: a group with two prompts
    means the reward was built for another group size than the trainer's."""
    if len(prompts) % group_size == 0 and any(len(set(prompts[first : first + group_size])) > 1
                                              for first in range(0, len(prompts), group_size)):
        raise ValueError(f"verifier_reward: built for num_generations={group_size}, but the trainer's groups "
                         "are smaller; build it with verifier_reward(..., args=<the trainer's GRPOConfig>)")


def _scaling(scale: Any) -> str:
    """GRPOConfig's scale_rewards as a name (TRL maps True and False to "group" and "none")."""
    return {True: "group", False: "none"}.get(scale, scale)


def _prompt_text(prompt: Any) -> str:
    """A prompt as text: a string, or a conversation's messages joined (TRL's conversational format)."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(message.get("content", "")) for message in prompt) if isinstance(prompt, list) else str(prompt)


def _prompt_id(text: str) -> str:
    """A stable id from the prompt's text: what keys the corruption channels' per-example noise."""
    return "p-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _log_verdicts(log_extra: Any, records: list[GenerationRecord]) -> None:
    rows = [record.verifier.to_json() for record in records]
    members = sorted({key.split(".")[1] for row in rows for key in row if key.startswith("member.") and key.endswith(".reward")})
    for member in members:
        log_extra(f"member_{member}", [row.get(f"member.{member}.reward") for row in rows])
    log_extra("judge_correct", [record.judgment.correct for record in records])


def verifier_reward(
    members: Sequence[str | Mapping[str, Any]] = ("clean",),
    *,
    channel: str = "none",
    rate: float = 0.0,
    channel_kwargs: Mapping[str, Any] | None = None,
    aggregation: str = "mean",
    method: str = "baseline",
    method_kwargs: Mapping[str, Any] | None = None,
    reference_column: str = "reference",
    extract: str = "strict",
    args: Any = None,
    seed: int = 0,
) -> VerifierReward:
    """The training verifier as a TRL reward function.

    `members`: each member's checker name (`clean`, `early_stop`, `any_box`, ...) or a mapping with
    `name`, `checker` and `corrupted` (whether `channel` corrupts it; names default to m0, m1, ...).
    `channel` and `rate`: the corruption channel (`flip`, `asymmetric`, `missing`, ...) on the corrupted
    members. `aggregation`: how member verdicts combine (`mean`, `majority`, ...). `method`: what is
    optimised from them (`baseline`, `robust` for disagreement shaping, `corrected`). `extract`: how the
    independent judge reads answers. `args`: the trainer's GRPOConfig, the one place GRPO's group size
    (`num_generations`) and reward scaling (`scale_rewards`) are set, which the advantages in the
    records follow; None takes GRPOConfig's defaults. The dataset needs a `reference_column` of answers;
    `id` and `metadata` columns are used when present."""
    group_size, scaling = _grpo_settings(args)
    corrupt = channel != "none"
    listed = [member if isinstance(member, Mapping) else {"checker": member} for member in members]
    raw = {
        "seed": seed, "method": method, "method_kwargs": dict(method_kwargs or {}),
        "verifier": {"aggregation": aggregation, "members": [{"name": f"m{index}", "corrupted": corrupt, **member}
                                                             for index, member in enumerate(listed)]},
        "corruption": {"channel": channel, "rate": rate, "kwargs": dict(channel_kwargs or {})},
        "objective": {"rewards": ["correctness_reward"]},
        "evaluation": {"extract": extract},
        # the batch is TRL's to check; only the group size and the scaling enter the reward
        "trainer": {"num_generations": group_size, "scale_rewards": scaling, "per_device_train_batch_size": group_size},
    }
    try:
        config = resolve_config(validate_config(raw))
    except (ConfigError, UserError) as error:
        problems = getattr(error, "problems", None) or [str(error)]
        raise ValueError(f"verifier_reward: {_argument_named(problems[0])}") from None
    options = JudgeOptions.of(config.rewards, config.evaluation.extract)
    return VerifierReward(build_reward_pipeline(config), options, reference_column)


def _grpo_settings(args: Any) -> tuple[int, str]:
    """(num_generations, scale_rewards) of a GRPOConfig, or GRPOConfig's defaults for None."""
    if args is None:
        from trl import GRPOConfig

        fields = GRPOConfig.__dataclass_fields__
        return fields["num_generations"].default, _scaling(fields["scale_rewards"].default)
    if not hasattr(args, "num_generations"):
        raise ValueError(f"verifier_reward: args must be the trainer's GRPOConfig, got {type(args).__name__}")
    return int(args.num_generations), _scaling(args.scale_rewards)


def _argument_named(message: str) -> str:
    """The config error's first line, its field named as the keyword argument that set it."""
    line = message.strip().splitlines()[0].removeprefix("error: ")
    for field, argument in _ARGUMENTS.items():
        if line.startswith(field):
            return f"{argument}{line[len(field):]}"
    return line


def judge(rows: Iterable[Mapping[str, Any]], *, extract: str = "strict", completion_field: str = "completion",
          reference_field: str = "reference") -> list[dict[str, Any]]:
    """The independent judge over (prompt, completion, reference) rows: each row back with `correct`
    (None where the reference does not parse), `parsed` and `reason` (`hackable-rl judge`'s judge)."""
    try:
        options = JudgeOptions(extract=extract)
        return judge_records(((f"row {index}", row) for index, row in enumerate(rows)), completion_field,
                             reference_field, options)
    except UserError as error:
        raise ValueError(f"judge: {error}") from None


# --------------------------------------------------------------------------- callbacks


class _RewardCallback(TrainerCallback):
    """What both callbacks share: the reward whose records they read, bound to the trainer's args."""

    def __init__(self, reward: VerifierReward):
        if not isinstance(reward, VerifierReward):
            raise ValueError(f"{type(self).__name__}: reward must be what verifier_reward() returns, "
                             f"got {type(reward).__name__}")
        self.reward = reward

    def on_train_begin(self, args, state, control, processing_class=None, **kwargs):
        if not hasattr(args, "num_generations"):
            raise ValueError(f"{type(self).__name__}: the trainer is not a GRPOTrainer (its args have no num_generations)")
        self.reward.bind(args, processing_class)
        if getattr(self, "config", None) is not None and self.config.stop_training and args.world_size > 1:
            raise ValueError("HackingAlarmCallback: stop_training=True works in one process only (the other "
                             "processes would not stop with the main one); leave it False under accelerate launch")


class GenerationTraceCallback(_RewardCallback):
    """Writes each step's completions to the active MLflow run as `hackable-rl train` does
    (`tracking.traces`): the step's trace (`step 00012`, one span per completion named by its verdict,
    PAID-WRONG first) and one trace per completion (`step 00012 #3`) whose assessments are the judge's
    verdict (`judge`), the verifier's and each member's pay (`verifier`, `verifier.m0`) and the
    reference (`reference`), so MLflow's trace table filters the hacks. Needs an MLflow run, as
    `report_to="mlflow"` starts; logs from the main process only."""

    _kind_checked = False

    def on_train_begin(self, args, state, control, **kwargs):
        from hackable_rl.tracking.assessments import require_mlflow_assessments

        super().on_train_begin(args, state, control, **kwargs)
        if state.is_world_process_zero and "mlflow" not in (args.report_to or []):
            raise ValueError("GenerationTraceCallback: MLflow is not configured; pass report_to=\"mlflow\" to GRPOConfig "
                             "(and set MLFLOW_TRACKING_URI, or keep MLflow's local ./mlruns)")
        try:
            require_mlflow_assessments()
        except UserError as error:
            raise ValueError(f"GenerationTraceCallback: {error}") from None

    def on_step_end(self, args, state, control, **kwargs):
        records = _records_of(self.reward, state.global_step)
        if not state.is_world_process_zero or not records:
            return
        import mlflow

        from hackable_rl.tracking.traces import step_trace_name, write_traces

        run = mlflow.active_run()
        if run is None:
            log.warning("GenerationTraceCallback: no active MLflow run at step %d; no trace written", state.global_step)
            return
        client = mlflow.MlflowClient()
        if not self._kind_checked:
            _open_as_model_training(client, run.info.experiment_id)
            self._kind_checked = True
        rows = [record.to_json() for record in records]
        write_traces(client, run.info.run_id, [(step_trace_name(state.global_step), rows, {"step": str(state.global_step)})])


class HackingAlarmCallback(_RewardCallback):
    """The judge-free hacking-onset alarm (docs/metrics.md): each step's signals from the reward's
    records (never the judge), a CUSUM per watched signal, fired once `votes` signals crossed. Logs the
    signals and `alarm` (0 or 1) into the trainer's logs (so to MLflow with report_to="mlflow"), and
    with `stop_training=True` ends training at the firing step.

    `audit={"k": 4, ...}` is `alarm.audit` (the same fields, docs/metrics.md "Audited alarm"): each step
    k completions are judged, by `audit_judge(completion, reference)` (True/False or a Judgment) or, by
    default, the reward's own independent judge, and the audited gap's test fires the alarm
    (`signal/audit_gap`; `alarm/audit_judge_calls` counts the judge calls)."""

    def __init__(self, reward: VerifierReward, *, signals: Sequence[str] | None = None, votes: int | None = None,
                 threshold: float | None = None, stop_training: bool = False, audit: Mapping[str, Any] | None = None,
                 audit_judge: Callable[[str, str], Any] | None = None):
        super().__init__(reward)
        from pydantic import ValidationError

        from hackable_rl.config.experiment import AlarmConfig
        from hackable_rl.training.alarm import OnsetAlarm
        from hackable_rl.training.alarm_audit import StepAudit

        given = {"signals": list(signals) if signals is not None else None, "votes": votes, "threshold": threshold,
                 "audit": dict(audit) if audit is not None else None}
        try:
            self.config = AlarmConfig(enabled=True, stop_training=stop_training,
                                      **{key: value for key, value in given.items() if value is not None})
        except ValidationError as error:
            first = error.errors()[0]
            raise ValueError(f"HackingAlarmCallback: {'.'.join(map(str, first['loc'])) or 'settings'}: {first['msg']}") from None
        try:
            self.audit = StepAudit.of(self.config.audit, audit_judge, "audit_judge")
        except UserError as error:
            raise ValueError(f"HackingAlarmCallback: {error}") from None
        self.alarm = OnsetAlarm(self.config)
        self.firing: Any = None
        self.history: list[dict[str, Any]] = []
        """Each step's signals and alarm state, as logged."""
        self._signals: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        completions = getattr(args, "generation_batch_size", None)  # GRPOConfig's completions per step
        if self.audit is not None and completions and self.audit.k > completions:
            raise ValueError(f"HackingAlarmCallback: audit.k: {self.audit.k} is more than the {completions} "
                             "completions of a step (GRPOConfig's generation_batch_size); audit at most that many")

    def on_step_end(self, args, state, control, **kwargs):
        from hackable_rl.training.alarm import AUDIT_SIGNAL
        from hackable_rl.training.signals import step_signals

        records = _records_of(self.reward, state.global_step)
        if not records:
            return
        rows = [record.to_json() for record in records]
        self._signals = step_signals(state.global_step, rows)
        if self.audit is not None:
            try:
                gap = self.audit.audit(state.global_step, rows)
            except UserError as error:
                raise ValueError(f"HackingAlarmCallback: {error}") from None
            self._signals = self._signals.with_values(**{AUDIT_SIGNAL: gap})

    def on_log(self, args, state, control, logs=None, **kwargs):
        from hackable_rl.training.alarm_audit import AUDIT_CALLS

        if self._signals is None or logs is None or "train_runtime" in logs:
            return
        signals, self._signals = self._signals.with_values(entropy=logs.get("entropy")), None
        firing = self.alarm.update(signals)
        metrics = {f"signal/{name}": value for name, value in signals.to_json().items()
                   if name != "step" and isinstance(value, int | float)}
        metrics["alarm"] = float(self.alarm.raised)
        if self.audit is not None:
            metrics[AUDIT_CALLS] = float(self.audit.calls)
        self.history.append({"step": state.global_step, **metrics})
        if state.is_world_process_zero:
            _log_to_mlflow(metrics, state.global_step)
        if firing is not None:
            self.firing = firing
            log.warning("%s", firing.describe())
            if self.config.stop_training:
                control.should_training_stop = True


def _records_of(reward: VerifierReward, step: int) -> list[GenerationRecord]:
    """The records of training step `step` (none where the step scored no new completions)."""
    return reward.last_step_records() if reward.last_step == step else []


def _log_to_mlflow(metrics: dict[str, float], step: int) -> None:
    """Into the active MLflow run (report_to="mlflow" starts one), beside the trainer's own metrics;
    without one, the metrics stay in `HackingAlarmCallback.history` only."""
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.log_metrics(metrics, step=step)


def _open_as_model_training(client: Any, experiment_id: str) -> None:
    """Tags the experiment so MLflow 3's UI opens it on its runs table (model training), as the
    project's own experiments are; a kind the user chose stays."""
    from hackable_rl.tracking.opening import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND

    if EXPERIMENT_KIND_TAG not in client.get_experiment(experiment_id).tags:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
