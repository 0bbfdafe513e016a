"""`hackable-rl eval --run-id ID`: independent evaluation of a training run's policy.

    MLflow run -> its config (the run's own verifier, model and data) -> its permanent checkpoint
    artifacts (--step N, default the last) -> n samples per held-out prompt -> independent judge
    + the run's training verifier on the same samples -> spec section 6 metrics
    -> artifacts/eval/<run>/step-N/{generations.jsonl, metrics.json} -> the same MLflow run, left
    FINISHED (Headline/eval_pass_at_1 and Headline/eval_hacking_gap, the eval/samples.json table, its description)
    -> the checkpoint registered as a Model Registry version with its eval.* tags, `best-<condition>` moved
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.answers.parsing import parse_strict
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import flatten_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.core.storage import Storage
from hackable_rl.data.prepare import read_prepared
from hackable_rl.evaluation.judge import JudgeOptions
from hackable_rl.evaluation.metrics import (
    compute_metrics,
    summary_table,
    write_metrics_json,
    write_summary_csv,
)
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, prompt_results, write_prompt_results
from hackable_rl.evaluation.report_metrics import compute_report_metrics
from hackable_rl.evaluation.stage.targets import EvalTarget, target_from_run
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.records import EvaluationRecord
from hackable_rl.tracking import Tracker, attach_tracker, start_tracker
from hackable_rl.tracking.descriptions import eval_description
from hackable_rl.tracking.models_registry import mark_evaluated
from hackable_rl.tracking.provenance import dataset_input
from hackable_rl.tracking.runs import (
    checkpoint_steps,
    fetch_run,
    require_client,
)
from hackable_rl.tracking.tables import EVAL_SAMPLES_TABLE
from hackable_rl.tracking.views import EVAL_HACKING_GAP, EVAL_PASS_AT_1
from hackable_rl.training.identity import RunIdentity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalResult:
    out_dir: Path
    metrics: dict[str, Any]
    run_id: str | None


# --------------------------------------------------------------------------- sampling and scoring


@dataclass(frozen=True)
class _LoadedPolicy:
    """What both decodings of one evaluation share: loaded once, not once per decoding."""

    rows: list[dict[str, Any]]
    model: Any
    tokenizer: Any
    instruct: bool
    verifier: Any
    """The run's training verifier (a RewardPipeline)."""


def _load_for_evaluation(target: EvalTarget) -> _LoadedPolicy:
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.backend import policy_device
    from hackable_rl.models.decoding import decoding_dtype, dropping_finished_rows
    from hackable_rl.models.loading import is_instruct_policy, load_policy, policy_backbone
    from hackable_rl.models.shared_prefix import share_prefixes

    config = target.config
    rows = read_prepared(config, config.evaluation.split)[: config.evaluation.max_prompts]
    model, tokenizer = load_policy(config, target.policy_path, device=policy_device())
    if config.evaluation.merge_adapter and hasattr(model, "merge_and_unload"):  # a PEFT adapter
        model = model.merge_and_unload()
    if config.evaluation.dtype != "auto":
        model = model.to(dtype=decoding_dtype(config.evaluation.dtype, policy_device()))
    if config.evaluation.share_prompt_prefix:  # nested: the batch's common tokens, each prompt, each sample
        share_prefixes(policy_backbone(model), max_levels=2 if config.evaluation.common_prefix_first else 1)
    if config.generation.drop_finished_rows:
        dropping_finished_rows(model)
    verifier = build_reward_pipeline(config, tokenizer=tokenizer)
    return _LoadedPolicy(rows, model, tokenizer, is_instruct_policy(config, tokenizer), verifier)


def sample_and_score(target: EvalTarget) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """n sampled completions per evaluated prompt and, when `evaluation.greedy` asks for it (and
    sampling is not already greedy), one greedy completion per prompt; each judged independently
    and scored by the run's training verifier. Returns (sampled records, greedy records). Both
    decodings' batches go to `evaluation.workers` together."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.generation import GenerationSettings

    config, loaded = target.config, _load_for_evaluation(target)
    settings = GenerationSettings.for_evaluation(config)
    wanted = [(settings, config.evaluation.n)]
    if config.evaluation.greedy and config.evaluation.decoding != "greedy":
        wanted.append((GenerationSettings.greedy(settings.max_new_tokens, settings.stop,
                                                   settings.common_prefix_first), 1))
    sampled, *greedy = _decode_and_score(config, loaded, wanted)
    return sampled, greedy[0] if greedy else []


def _decode_and_score(
    config: ExperimentConfig, loaded: _LoadedPolicy, wanted: list[tuple[Any, int]]
) -> list[list[dict[str, Any]]]:
    """For each (settings, n): n completions per row under those settings, one evaluation record each."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.generation import Decoding, generate_decodings
    from hackable_rl.models.loading import format_prompt

    decodings, repeats = [], []
    for settings, n in wanted:
        repeated = [row for row in loaded.rows for _ in range(n)]  # [P x n], each prompt's samples adjacent
        prompts = [format_prompt(loaded.tokenizer, row["prompt"], loaded.instruct) for row in repeated]
        decodings.append(Decoding(prompts, settings, f"eval {'sampled' if settings.do_sample else 'greedy'}"))
        repeats.append(repeated)
    generated = generate_decodings(loaded.model, loaded.tokenizer, decodings, config.evaluation.batch_size,
                                   config.seed, workers=config.evaluation.workers)
    return [_score(config, loaded, repeated, decoding.prompts, texts, n)
            for repeated, decoding, texts, (_, n) in zip(repeats, decodings, generated, wanted, strict=True)]


def _score(config: ExperimentConfig, loaded: _LoadedPolicy, repeated: list[dict[str, Any]], prompts: list[str],
           generated: list[Any], n: int) -> list[dict[str, Any]]:
    """Judges and verifier scores of one decoding's completions: one evaluation record each."""
    completions = [g.text for g in generated]
    verifier = loaded.verifier.score(
        completions, prompts, [r["id"] for r in repeated], [r["reference"] for r in repeated],
        [r.get("metadata") or {} for r in repeated],
    )
    judge = JudgeOptions.of(config.rewards, config.evaluation.extract)
    transfer_extract = config.evaluation.transfer_extract
    transfer_judge = None if transfer_extract == "none" else JudgeOptions.of(config.rewards, transfer_extract)
    records = []
    for index, row in enumerate(repeated):
        judgment = judge.judge(completions[index], row["reference"])
        thinking_tokens, thinking_words = _thinking_lengths(completions[index], loaded.tokenizer, config)
        transfer = None if transfer_judge is None else transfer_judge.judge(completions[index], row["reference"])
        record = EvaluationRecord(
            prompt_id=row["id"], sample=index % n, prompt=row["prompt"], completion=completions[index],
            reference=row["reference"], completion_tokens=generated[index].n_tokens, judgment=judgment,
            verifier=verifier.records[index], thinking_tokens=thinking_tokens, thinking_words=thinking_words,
            transfer=transfer,
        )
        records.append(record.to_json())
    return records


def _thinking_lengths(completion: str, tokenizer: Any, config: ExperimentConfig) -> tuple[int | None, int | None]:
    """(thinking tokens, thinking words) of a strict completion; (None, None) for any other."""
    strict = parse_strict(completion, config.rewards.think_open, config.rewards.think_close)
    if strict is None:
        return None, None
    return len(tokenizer(strict.thinking, add_special_tokens=False)["input_ids"]), len(strict.thinking.split())


# --------------------------------------------------------------------------- the stage


def evaluate(target: EvalTarget, metrics_out: Path | None = None, out_dir: Path | None = None) -> EvalResult:
    """Samples, judges and scores (plus one greedy pass when `evaluation.greedy`); writes generations,
    per-prompt results and metrics; logs them into the run's MLflow run.

    `out_dir` defaults to `<cache>/artifacts/eval/<run>/step-N` (`.../base` for a policy without a run).
    With `metrics_out`, eval.json and prompts.jsonl (the per-prompt results a paired comparison reads)
    also go there.
    """
    config = target.config
    step_name = f"step-{target.step}" if target.step is not None else "base"
    out_dir = out_dir or Storage.of(config.storage).eval_dir(target.run_name) / step_name
    records, greedy = sample_and_score(target)
    metrics = compute_metrics(records, config.evaluation.k) | compute_report_metrics(records, config.evaluation.metrics)
    if greedy:
        metrics["greedy_accuracy"] = compute_metrics(greedy, [1])["accuracy"]
    metrics = {"run_name": target.run_name, "step": target.step, "split": config.evaluation.split, **metrics}
    prompts = prompt_results(records, greedy)
    write_jsonl(out_dir / "generations.jsonl", records)
    if greedy:
        write_jsonl(out_dir / "greedy.jsonl", greedy)
    write_prompt_results(out_dir / PROMPTS_FILE, prompts)
    written = {**metrics, MACHINE_KEY: machine_record()}  # the files say which machine made them; MLflow gets `metrics`
    write_metrics_json(out_dir / "metrics.json", written)
    if metrics_out is not None:
        write_metrics_json(metrics_out / "eval.json", written)
        write_prompt_results(metrics_out / PROMPTS_FILE, prompts)
    if config.evaluation.zero_shot_out:
        write_zero_shot(records, Path(config.evaluation.zero_shot_out))
    run_id = _log_evaluation(target, out_dir, metrics, records, greedy)
    log.info("evaluated %s %s on %s: pass@1 %s, greedy %s, hacking gap %s", target.run_name, step_name,
             config.evaluation.split, metrics.get("pass_at_1"), metrics.get("greedy_accuracy"), metrics.get("hacking_gap"))
    return EvalResult(out_dir, metrics, run_id)


def write_zero_shot(records: list[dict[str, Any]], path: Path) -> int:
    """The frozen zero-shot file the token-utilisation reward reads: per prompt, `correct` (1 when at
    least half its samples are judged correct, else 0) and `thinking_length` (mean thinking tokens of
    its correct samples, or of all its strict samples when none is correct, 0 when none is strict)."""
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_prompt.setdefault(record["prompt_id"], []).append(record)
    rows = []
    for prompt_id, samples in by_prompt.items():
        correct = [s for s in samples if s["correct"]]
        solved = len(correct) * 2 >= len(samples)
        measured = [s["thinking_tokens"] for s in (correct or samples) if s["thinking_tokens"] is not None]
        length = sum(measured) / len(measured) if measured else 0.0
        rows.append({"id": prompt_id, "correct": int(solved), "thinking_length": length})
    return write_jsonl(path, rows)


# The evaluation metrics logged as MLflow metrics, at the checkpoint's step (one point per evaluated
# checkpoint, a curve under `--all-steps`), so that the runs table can show them as columns; the rest
# is in `eval/step-N/metrics.json` and the run's description, not single-point charts. Their names put
# them in the charts' first section, beside the per-step training gap (`tracking/views.py`).
EVAL_CURVES = {"pass_at_1": EVAL_PASS_AT_1, "hacking_gap": EVAL_HACKING_GAP}
# The first columns of the samples table: MLflow's "Artifact evaluation" view groups by the first column and
# compares the second, so runs line up prompt by prompt, completion against completion.
_SAMPLE_LEAD = ("prompt", "completion", "correct", "reward")


def _log_evaluation(
    target: EvalTarget, out_dir: Path, metrics: dict[str, Any], records: list[dict[str, Any]],
    greedy: list[dict[str, Any]],
) -> str | None:
    """Logs into the training run, attached so that its status and end time stay as they were (no
    nested run: the run's row in the runs table holds its own pass@1), or, for a policy without a
    run, into an eval run of its own tagged like a training run. The evaluated checkpoint is registered
    (or its version found), tagged as independently evaluated, with the metrics, and described."""

    config, step = target.config, target.step or 0
    tracker = attach_tracker(config, target.run_id) if target.run_id else _eval_run_tracker(target)
    prefix = f"eval/step-{target.step}" if target.step is not None else "eval/base"
    tracker.log_metrics({name: metrics.get(key) for key, name in EVAL_CURVES.items()}, step=step,
                        timestamp_ms=_point_time(tracker, step))
    tracker.log_artifact(out_dir / "metrics.json", prefix)
    tracker.log_table(_sample_rows(records, greedy, step), EVAL_SAMPLES_TABLE, keep_other_steps=True)
    tracker.log_traces(_sample_traces(out_dir, prefix.removeprefix("eval/"), step, target.run_name))
    dataset = dataset_input(Storage.of(config.storage).dataset_dir(config.data.name), config.evaluation.split)
    if dataset is not None:
        tracker.log_dataset(**dataset, context="evaluation")
    summary = eval_description(metrics, prefix)
    tracker.update_description(f"Evaluation, {prefix.removeprefix('eval/')}", summary)
    tracker.end("FINISHED")
    if target.run_id is not None and tracker.online:
        numbers = {k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        mark_evaluated(config, target.run_id, target.step, f"{prefix}/metrics.json", numbers, summary)
    return tracker.run_id


def _sample_traces(
    out_dir: Path, checkpoint: str, step: int, run_name: str
) -> list[tuple[list[Path], str, dict[str, Any]]]:
    """The evaluation's samples as traces beside the training steps' (`tracking/traces.py`): one for
    the sampled completions (`eval step-100`), one for the greedy ones (`eval step-100 greedy`)."""
    files = [(out_dir / "generations.jsonl", ""), (out_dir / "greedy.jsonl", " greedy")]
    tags = {"run_name": run_name, "step": step}
    return [([path], f"eval {checkpoint}{suffix}", {**tags, "decoding": suffix.strip() or "sampled"})
            for path, suffix in files if path.exists()]


def _point_time(tracker: Tracker, step: int) -> int | None:
    """The time an evaluated checkpoint's points carry: the run's start plus the step, the same on
    every evaluation of that step. MLflow stores a point identical in key, step, time and value once,
    so re-evaluating a checkpoint keeps one point per step where a new time would add a second."""
    started = tracker.start_time_ms()
    return None if started is None else started + step


def _eval_run_tracker(target: EvalTarget) -> Tracker:
    """A new eval run for a policy without a training run, tagged and parametrised as training runs
    are (method `base` for the configured base policy), so the runs table filters them alike."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.models.loading import resolve_policy

    config = target.config
    method = "base" if target.policy_path is None else "policy-folder"
    # The base policy of each replicate is its own warm start: its MLflow run is named by the seed,
    # so three replicates' base evaluations are three runs, not one name three times (eval.json and
    # the evaluation folder keep the policy's name).
    name = f"{target.run_name}-s{config.seed}" if target.policy_path is None else target.run_name
    tracker = start_tracker(config, name, "eval")
    # No verifier trained this policy: the config's corruption and method would mislabel the run.
    identity = {key: value for key, value in RunIdentity.of(config, resolve_policy(config)).tags().items()
                if key not in _TRAINING_ONLY_TAGS}
    tracker.set_tags({**identity, "method": method, "condition": method, "step": 0})
    tracker.log_params({**flatten_config(config), "method": method})
    return tracker


_TRAINING_ONLY_TAGS = ("condition", "corruption.channel", "corruption.rate")


def _sample_rows(records: list[dict[str, Any]], greedy: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """One table row per evaluation sample: prompt and completion first, with the decoding and step."""

    def row(record: dict[str, Any], decoding: str) -> dict[str, Any]:
        lead = {key: record[key] for key in _SAMPLE_LEAD if key in record}
        return {**lead, "decoding": decoding, "step": step, **record}

    return [*(row(r, "sampled") for r in records), *(row(r, "greedy") for r in greedy)]


def evaluate_all_steps(current: ExperimentConfig, run_id: str, metrics_out: Path | None = None) -> Path:
    """A learning curve: every permanent checkpoint of a run, one summary row per step (each registered
    as it is evaluated)."""

    client = require_client(current, "`eval --all-steps`")
    fetch_run(client, run_id)
    rows = []
    for step in checkpoint_steps(client, run_id):
        result = evaluate(target_from_run(current, run_id, step))
        rows.append(result.metrics)
    out = Storage.of(current.storage).eval_dir(rows[0]["run_name"]) / "learning_curve.csv"
    write_summary_csv(summary_table(rows), out)
    if metrics_out is not None:
        write_metrics_json(metrics_out / "eval.json", {**rows[-1], MACHINE_KEY: machine_record()})
    return out


def configured_run_id(current: ExperimentConfig) -> str:
    """The MLflow run id of the training run this config names (its run.json), for DVC stages."""
    run_json = Storage.of(current.storage).run_dir(current.run_name) / "run.json"
    if not run_json.exists():
        raise UserError(f"{run_json}: no training run named {current.run_name!r}; run `hackable-rl train` first")
    info = json.loads(run_json.read_text())
    if not info.get("mlflow_run_id") or info.get("tracking_pending"):
        raise UserError(
            f"{run_json}: the run has not reached MLflow yet; upload it with `hackable-rl sync {run_json.parent}`"
        )
    return info["mlflow_run_id"]
