"""The reward of the TRL parts (`verifier_reward`: the training verifier as a reward function of TRL's
contract, `VerifierReward`) and the independent judge over rows (`judge`); `hackable_rl.trl_parts`
hands them out."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hackable_rl.answers.parsing import completion_text
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import ConfigError, UserError
from hackable_rl.evaluation.judge import JudgeOptions, judge_records
from hackable_rl.extensions import resolve_config
from hackable_rl.reward.pipeline import ObjectiveReward, RewardPipeline, build_reward_pipeline
from hackable_rl.reward.records import GenerationRecord
from hackable_rl.training.latest_step import LatestStep

__all__ = ["VerifierReward", "judge", "verifier_reward"]


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
        # deferred: torch and transformers load only where a model runs (start-up cost)
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
