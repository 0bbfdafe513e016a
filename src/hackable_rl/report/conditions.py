"""What a study report reads besides the metrics: each condition's own name, which conditions are
controls, and the study file's declarations (`equivalence_margin`).

A control (a DVC stage that trains with a reward carrying no correctness signal: the random reward,
the format reward alone) runs `hackable-rl condition --method <the reference method>` like a method's
cell, so its condition alone would read as that method at its rate. Its run name says what it is
(`--set tracking.run_name=control-<name>-s<seed>`, or `condition.control` in its condition.json), and
the report names it `control-<name>-s<seed>`: never a row of the reference method, never pooled with
the clean reference (the reference method at rate 0) or called "<method> r0.5".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.config.loading import read_yaml
from hackable_rl.config.study import load_study
from hackable_rl.core.errors import UserError
from hackable_rl.core.numerics import MACHINE_KEY
from hackable_rl.evaluation.metrics import summary_table
from hackable_rl.study.records import (
    condition_row,
    find_condition_files,
    read_condition,
    study_methods,
)

log = logging.getLogger(__name__)

CONTROL_PREFIX = "control-"
"""Run names of a study's control stages (`tracking.run_name=control-<name>-s<seed>`)."""


def control_of(data: dict[str, Any]) -> str | None:
    """The control a condition.json records (`condition.control`, else from its run name
    `control-<name>-s<seed>`); None for a method's cell."""
    declared = data["condition"].get("control")
    if declared:
        return str(declared)
    run_name = str(data.get("run_name") or "")
    return run_name.removeprefix(CONTROL_PREFIX).rsplit("-s", 1)[0] if run_name.startswith(CONTROL_PREFIX) else None


def condition_name(data: dict[str, Any]) -> str:
    """The condition's name in the summary: `control-<name>-s<seed>` for a control, else its own."""
    control = control_of(data)
    seed = data["condition"].get("seed")
    return f"{CONTROL_PREFIX}{control}-s{seed}" if control else str(data["condition"].get("name"))


def method_label(data: dict[str, Any]) -> str:
    """What a report groups a condition by: its method, or `control-<name>` for a control."""
    control = control_of(data)
    return f"{CONTROL_PREFIX}{control}" if control else str(data["condition"]["method"])


def refuse_shared_names(files: Sequence[Path], names: Sequence[str]) -> None:
    """Two condition.json files that name one condition would be one row twice: refused, naming both."""
    seen: dict[str, Path] = {}
    for path, name in zip(files, names, strict=True):
        if name in seen:
            raise UserError(f"{seen[name]} and {path}: both name the condition {name!r}; give each condition its own "
                            f"name (a control: --set tracking.run_name={CONTROL_PREFIX}<name>-s<seed>)")
        seen[name] = path


def study_table(study_dir: Path) -> pd.DataFrame:
    """One row per condition.json below `study_dir` (`study.records.condition_row`), each under its
    own name and with a `control` column (blank for a method's cell); sorted by method, rate, flaw and
    seed, controls last."""
    files = find_condition_files(study_dir)
    records = [read_condition(path) for path in files]
    names = [condition_name(data) for data in records]
    refuse_shared_names(files, names)
    rows = []
    for data, name in zip(records, names, strict=True):
        row = condition_row(data)
        del row["name"]
        rows.append({"name": name, "method": row.pop("method"), "control": control_of(data)} | row)
    table = summary_table(rows)
    order = {method: index for index, method in enumerate(study_methods())}
    keys = table["method"].map(lambda m: order.get(m, len(order))) + table["control"].notna() * (len(order) + 1)
    return (table.assign(_order=keys).sort_values(["_order", "control", "rate", "flaw", "seed"], na_position="first")
            .drop(columns="_order").reset_index(drop=True))


def column_mean(group: pd.DataFrame, column: str) -> float | None:
    """The column's mean over the rows that recorded it; None where the column is absent or all blank."""
    return float(group[column].mean()) if column in group and group[column].notna().any() else None


def methods_and_controls(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The method cells and the controls of a `study_table`."""
    is_control = table["control"].notna()
    return table[~is_control], table[is_control]


ONE_WARM_START = "95% t-intervals across training seeds, conditional on the study's one warm start"
OWN_WARM_STARTS = "95% t-intervals across replicates, each with its own warm start"
PARAMS_FILE = "params.yaml"
LOCK_FILE = "dvc.lock"
"""DVC's record of what each stage of a study ran with (its deps' paths and hashes)."""


def interval_label(study_dir: Path) -> str:
    """How a study's intervals read: across replicates that each warm-started their own policy, or
    conditional on one warm start. What ran decides where the study's dvc.lock records it (the warm
    starts its result stages read, `warm_starts_read`); otherwise what its params.yaml declares (a
    null `warmstart.seed`: one warm start per replicate), and one warm start where neither says."""
    read = warm_starts_read(Path(study_dir).resolve().parent / LOCK_FILE)
    if read:
        return OWN_WARM_STARTS if len(read) > 1 else ONE_WARM_START
    params = Path(study_dir).resolve().parent / PARAMS_FILE
    data = read_yaml(params) if params.is_file() else {}
    warmstart = data.get("warmstart") if isinstance(data.get("warmstart"), dict) else None
    return OWN_WARM_STARTS if warmstart is not None and warmstart.get("seed") is None else ONE_WARM_START


def warm_starts_read(lock: Path) -> set[str]:
    """The model folders (`<cache>/models/...`) that a study's result stages (those writing under
    `results/`) read, as its dvc.lock recorded them when they ran; empty without a readable lock."""
    data = read_yaml(lock) if lock.is_file() else {}
    stages = data.get("stages") if isinstance(data, dict) else None
    read: set[str] = set()
    for stage in (stages or {}).values():
        outs = [out.get("path", "") for out in stage.get("outs", []) if isinstance(out, dict)]
        if not any(path.startswith("results/") for path in outs):
            continue
        read |= {dep["path"] for dep in stage.get("deps", []) if isinstance(dep, dict)
                 and "/models/" in f"/{dep.get('path', '')}"}
    return read


def equivalence_margin(study_file: Path) -> float | None:
    """The study file's declared `equivalence_margin` (None: the file or the key is absent, and no
    comparison is called equivalent)."""
    if not study_file.is_file():
        log.info("%s: no study file, so no equivalence margin", study_file)
        return None
    return load_study(study_file).equivalence_margin


NOT_RECORDED = "machine not recorded"
"""What a result file written before the machine record existed says, and what the report counts."""


def machines_line(study_dir: Path) -> str:
    """Which machines wrote the study's condition.json files: each distinct CPU with its dispatch
    flags and the dispatch torch used, with how many conditions it ran; those without a record are
    counted as such (`core.numerics.machine_record`)."""
    counts: Counter[str] = Counter()
    for path in find_condition_files(study_dir):
        record = read_condition(path).get(MACHINE_KEY)
        counts[_machine_text(record) if isinstance(record, dict) else NOT_RECORDED] += 1
    parts = [f"{text}: {count} condition{'s' if count != 1 else ''}" for text, count in sorted(counts.items())]
    return "Machines: " + "; ".join(parts) + "."


def _machine_text(record: dict[str, Any]) -> str:
    flags = record.get("flags") or {}
    shown = [flag if value == "yes" else f"no {flag}" for flag, value in flags.items() if value is not None]
    dispatch = (record.get("dispatch") or {}).get("torch_cpu_capability")
    shown += [f"torch {record['torch']}"] if record.get("torch") else []
    shown += [f"dispatching {dispatch}"] if dispatch else []
    source = record.get("recorded_afterwards_from")
    if source:
        shown.append("recorded afterwards from " + ("its MLflow run's environment.json" if source.startswith("MLflow run")
                                                    else source))
    return f"{record.get('cpu') or 'CPU model not recorded'} ({'; '.join(shown)})"
