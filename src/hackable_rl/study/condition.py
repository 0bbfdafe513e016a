"""One condition of a study (spec section 7: methods x corruption rates x seeds, one at a time),
run end to end.

    config + method -> base: evaluate the warm-started policy under the condition's verifier
                       baseline/robust: train (GRPO) -> evaluate the final permanent checkpoint
                    -> <out>/condition.json  (status ok | failed; a failure is recorded, never raised)
    condition.json files -> collect_study -> summary table -> summary.csv / summary.json

DVC matrix stages call `hackable-rl condition` once per cell, so one failed condition neither stops
the others nor disappears from the table: its row keeps the error text and blank metrics.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.alarm.onset import write_onset
from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import iter_jsonl, read_json, write_jsonl
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.core.stats import mean
from hackable_rl.core.storage import Storage
from hackable_rl.data.prepare import read_prepared
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, read_prompt_results, write_prompt_results
from hackable_rl.evaluation.stage.checkpoint_curve import evaluate_checkpoints
from hackable_rl.evaluation.stage.evaluate import evaluate
from hackable_rl.evaluation.stage.targets import EvalTarget, target_from_model
from hackable_rl.extensions import check_config
from hackable_rl.models.sources import warm_start_fingerprint
from hackable_rl.reward.checkers import CheckerOptions
from hackable_rl.reward.corruption import configured_flaw
from hackable_rl.study.cells import (
    Cell,
    NoiseCell,
)
from hackable_rl.study.exploits import (
    curve_columns,
    exploit_share_by_prompt,
    pattern_column,
    pattern_shares_by_prompt,
    training_curve,
)
from hackable_rl.study.records import (
    BASE,
    CONDITION_FILE,
    CURVE_FILE,
    EXPLOITS_FILE,
    IDENTICAL,
    study_methods,
    write_condition,
)
from hackable_rl.tracking.opening import attach_tracker
from hackable_rl.training.curves import first_tenth, last_tenth, mean_of
from hackable_rl.training.run_dir import Resume

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Condition:
    """One cell of a study: what was run, independent of how it went."""

    method: str
    rate: float
    seed: int
    channel: str
    flaw: str | None
    cell: str | None = None
    """The blind-spot cell (`study.cells`) whose members it trains against; None in a rate grid."""

    @property
    def name(self) -> str:
        """`<method>-<channel>[-<flaw>]-r<rate>-s<seed>`, or `<method>-<cell>-s<seed>` in a blind-spot
        study: also the run name, so cells never share a folder."""
        if self.cell is not None:
            return f"{self.method}-{self.cell}-s{self.seed}"
        channel = f"{self.channel}-{self.flaw}" if self.flaw else self.channel
        return f"{self.method}-{channel}-r{self.rate:g}-s{self.seed}"


def condition_of(
    config: ExperimentConfig, method: str, cell: Cell | NoiseCell | None = None, variant: bool = False
) -> Condition:
    """The condition `method` names under `config`; a method variant (`variant`: a study label whose
    overrides set `method`) trains `config.method` under its own label."""
    if not variant and method != BASE and ":" not in method and method not in study_methods():
        raise UserError(f"--method {method!r}: expected one of {', '.join(study_methods())}, a method variant "
                        "of the study file, or 'package.module:method'")
    if cell is not None:
        return Condition(method, config.corruption.rate, config.seed, config.corruption.channel,
                         cell.exploited_flaw, cell.name)

    flaw = configured_flaw(config.corruption)
    return Condition(method, config.corruption.rate, config.seed, config.corruption.channel, flaw)


def condition_config(config: ExperimentConfig, condition: Condition) -> ExperimentConfig:
    """The config one condition runs: its method (base keeps the baseline verifier: no RL, same
    reward; a variant keeps the method its overrides set) and, unless the user named it, a run name
    that is unique within the study."""
    raw = config.model_dump(mode="json")
    if condition.method == BASE:
        raw["method"] = "baseline"
    elif condition.method in study_methods() or ":" in condition.method:
        raw["method"] = condition.method
    raw["tracking"]["run_name"] = config.tracking.run_name or condition.name

    return check_config(validate_config(raw, f"condition {condition.name}"), f"condition {condition.name}")


# --------------------------------------------------------------------------- one condition


def run_condition(
    config: ExperimentConfig, method: str, out_dir: Path, cell: Cell | NoiseCell | None = None, variant: bool = False,
    resume: Resume = "never",
) -> dict[str, Any]:
    """Runs one condition end to end and writes `<out_dir>/condition.json`; returns what it wrote.
    `resume="auto"` continues the condition's training run from its last resumable checkpoint when it
    has one (a cell retried after its worker died, `scheduling.ray_cells`).

    Any exception inside the run is caught and recorded (status `failed`, the error text and the
    traceback), so a DVC matrix keeps going; a bad `method` is the user's mistake and raises.
    """
    condition = condition_of(config, method, cell, variant)
    started = time.time()
    record: dict[str, Any] = {"condition": _described(condition), "run_name": condition.name}
    try:
        cfg = condition_config(config, condition)  # a method that refuses this cell is recorded as failed
        record["run_name"] = cfg.run_name
        record["warm_start"] = warm_start_fingerprint(cfg)  # which policy, by content, the condition began from
        record |= _run_base(cfg) if method == "base" else _run_trained(cfg, resume)
        _write_outcomes(cfg, condition, record, out_dir, getattr(cell, "patterns", ()))
        if method != "base" and cfg.evaluation.checkpoint_steps:
            record["checkpoints"] = evaluate_checkpoints(cfg, record, out_dir)
        record["status"], record["error"] = "ok", None
    except Exception as error:  # a failed condition is data, not a crash: keep it and move on
        log.error("condition %s failed: %s", condition.name, error)
        record |= {"status": "failed", "error": _error_text(error), "traceback": traceback.format_exc()}
    record["seconds"] = time.time() - started
    record[MACHINE_KEY] = machine_record()
    write_condition(out_dir / CONDITION_FILE, record)
    return record


def identical_twin(payoff_file: Path, cell: str | None, method: str) -> dict[str, str] | None:
    """The arm this (cell, method) equals by construction, as the payoff stage found it (payoff.json
    `identical_arms`), or None: trained as itself."""
    if cell is None:
        return None
    data = read_json(payoff_file)
    entries = data.get("identical_arms") if isinstance(data, dict) else None
    for entry in entries or []:
        if entry.get("cell") == cell and entry.get("method") == method:
            return dict(entry["same_as"])
    return None


def record_identical(config: ExperimentConfig, method: str, out_dir: Path, cell: Cell | NoiseCell,
                     twin: Mapping[str, str], variant: bool = False) -> dict[str, Any]:
    """condition.json of an arm that is not trained because it equals `twin` by construction: it points
    at the twin's folder (`<results>/<cell>/<method>-s<seed>`, the studies' layout), whose results the
    reports read in its place."""
    condition = condition_of(config, method, cell, variant)
    twin_folder = out_dir.parent.parent / twin["cell"] / f"{twin['method']}-s{config.seed}"
    record = {"condition": _described(condition), "run_name": condition.name, "status": IDENTICAL, "error": None,
              "identical_to": {"cell": twin["cell"], "method": twin["method"],
                               "folder": os.path.relpath(twin_folder, out_dir)}}
    write_condition(out_dir / CONDITION_FILE, record)
    return record


def _described(condition: Condition) -> dict[str, Any]:
    """The condition as condition.json records it (a rate grid's has no `cell`, as before cells existed)."""
    fields = asdict(condition)
    if fields["cell"] is None:
        del fields["cell"]
    return fields | {"name": condition.name}


def _error_text(error: Exception) -> str:
    problems = getattr(error, "problems", None)
    text = "; ".join(problems) if problems else str(error)
    return f"{type(error).__name__}: {text}"


def _run_base(cfg: ExperimentConfig) -> dict[str, Any]:
    """The warm-started policy, evaluated under this condition's training verifier (no RL)."""
    target = replace(target_from_model(cfg, None), run_name=cfg.run_name)
    result = evaluate(target)
    return {"eval": _with_disagreement(result.metrics, result.out_dir), "train": {}, "run_id": result.run_id,
            "eval_dir": str(result.out_dir)}


def _run_trained(cfg: ExperimentConfig, resume: Resume) -> dict[str, Any]:
    """GRPO from scratch (a rerun replaces an earlier attempt) or, under `resume="auto"`, from the
    run's last resumable checkpoint, then the final checkpoint's eval."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.training.run import run_training

    continues = resume == "auto" and _resumable(Storage.of(cfg.storage).run_dir(cfg.run_name), cfg.trainer.max_steps)
    trained = run_training(cfg, resume="auto" if continues else "never", overwrite=not continues)
    checkpoint = Storage.of(cfg.storage).permanent_checkpoint(cfg.run_name, trained.final_step)
    if not checkpoint.is_dir():
        raise UserError(f"{checkpoint}: the run finished without its final permanent checkpoint")
    result = evaluate(EvalTarget(cfg, cfg.run_name, trained.run_id, trained.final_step, checkpoint))
    train = dict(trained.metrics) | {"verifier/disagreement/last": _last_tenth(trained.run_dir, "verifier/disagreement")}
    return {"eval": _with_disagreement(result.metrics, result.out_dir), "train": train, "run_id": trained.run_id,
            "eval_dir": str(result.out_dir), "run_dir": str(trained.run_dir)}


def _resumable(run_dir: Path, max_steps: int) -> bool:
    """Whether the run folder holds a run that stopped short of `max_steps` at a resumable checkpoint.
    A run that finished (its worker died during the eval) trains again from scratch: the Trainer
    cannot resume past its last step."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    from hackable_rl.training.checkpoints import last_resumable
    from hackable_rl.training.run_dir import checked_run_info

    if not (run_dir / "run.json").exists():
        return False
    info = checked_run_info(run_dir)
    finished = info.get("status") == "finished" and info.get("final_step", 0) >= max_steps
    return not finished and last_resumable(run_dir, before_step=max_steps) is not None


def _write_outcomes(cfg: ExperimentConfig, condition: Condition, record: dict[str, Any], out_dir: Path,
                    patterns: tuple[str, ...] = ()) -> None:
    """Beside condition.json, what a paired report needs without the cache: the eval's per-prompt
    results (prompts.jsonl), a trained run's judge onset and judge-free signals per step (onset.json,
    signals.csv) and, under a flaw, the exploit share per prompt (exploits.jsonl) and per training
    step (curve.csv), with each natural flaw's pattern share (`patterns`) beside it; the shares' means
    go into the record, and the pattern curves into the run's MLflow metrics (docs/studies.md)."""
    eval_dir = Path(record["eval_dir"])
    if (eval_dir / PROMPTS_FILE).exists():
        write_prompt_results(out_dir / PROMPTS_FILE, read_prompt_results(eval_dir / PROMPTS_FILE))
    if "run_dir" in record:  # every trained run: the judge onset and signals.csv (the alarm benchmark's input)
        write_onset(Path(record["run_dir"]), cfg.alarm, out_dir)
    if condition.flaw is None or not (eval_dir / "generations.jsonl").exists():
        return
    options = CheckerOptions.from_config(cfg)
    metadata = _metadata(cfg, cfg.evaluation.split) if patterns else None
    samples = [row for _, row in iter_jsonl(eval_dir / "generations.jsonl")]
    shares = exploit_share_by_prompt(samples, condition.flaw, options, metadata)
    by_pattern = pattern_shares_by_prompt(samples, patterns, options, metadata) if patterns else {}
    write_jsonl(out_dir / EXPLOITS_FILE, [{"prompt_id": p, "exploit_share": v} | by_pattern.get(p, {})
                                          for p, v in shares.items()])
    record["eval"]["exploit_share"] = mean(list(shares.values()))
    for column in map(pattern_column, patterns):
        record["eval"][column] = mean([row[column] for row in by_pattern.values() if column in row])
    if "run_dir" in record:
        train_metadata = _metadata(cfg, "train") if patterns else None
        curve = training_curve(Path(record["run_dir"]), condition.flaw, options, train_metadata, patterns)
        pd.DataFrame(curve, columns=curve_columns(patterns)).to_csv(out_dir / CURVE_FILE, index=False)
        for key in ("exploit_share", "hacking_gap", *map(pattern_column, patterns)):
            record["train"][f"{key}/first"] = mean_of(key, first_tenth(curve))
            record["train"][f"{key}/last"] = mean_of(key, last_tenth(curve))
        if patterns:
            _log_pattern_curves(cfg, record["run_id"], curve, patterns)


def _metadata(cfg: ExperimentConfig, split: str) -> dict[str, dict[str, Any]]:
    """prompt id -> its prepared row's metadata (a natural flaw's checker reads the prompt's chain)."""
    return {str(row["id"]): row.get("metadata") or {} for row in read_prepared(cfg, split)}


def _log_pattern_curves(cfg: ExperimentConfig, run_id: str | None, curve: list[dict[str, Any]],
                        patterns: tuple[str, ...]) -> None:
    """Each natural flaw's pattern share per step into the training run's MLflow metrics
    (`pattern_share/<flaw>`), measured from its generation records once training has ended."""
    if not run_id:
        return
    tracker = attach_tracker(cfg, run_id)
    for row in curve:
        tracker.log_metrics({pattern_column(flaw): row.get(pattern_column(flaw)) for flaw in patterns}, step=row["step"])
    tracker.end("FINISHED")


def _with_disagreement(metrics: dict[str, Any], eval_dir: Path) -> dict[str, Any]:
    """Adds `disagreement`: mean member disagreement U over the evaluated completions (None without
    any), measured on the same samples as correctness so the two can be plotted together."""
    values = [row.get("U") for _, row in iter_jsonl(eval_dir / "generations.jsonl")]
    return metrics | {"disagreement": mean(values)}


def _last_tenth(run_dir: Path, key: str) -> float | None:
    """Mean of a per-step metric over the last tenth of the steps (as training's final metrics)."""
    path = run_dir / "metrics.jsonl"
    rows = [row for _, row in iter_jsonl(path)] if path.exists() else []
    return mean_of(key, last_tenth(rows))
