"""The files a study condition leaves and the study table read from them: the condition file
format (condition.json, exploits.jsonl, curve.csv), the summary table and its files.

Below both `study/` (which writes them) and `report/` (which reads them), so neither imports
the other's way up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json, write_json
from hackable_rl.evaluation.metrics import summary_table, write_summary_csv
from hackable_rl.reward.methods import METHODS

BASE = "base"
"""The study's untrained cell: the base policy under the same judge and training verifier (no RL)."""
CONDITION_FILE = "condition.json"
EXPLOITS_FILE = "exploits.jsonl"
CURVE_FILE = "curve.csv"
# Columns that label a row; everything after them is a metric (eval keys as they are, `train/...`).
LABELS = ("name", "method", "rate", "seed", "channel", "flaw", "cell", "status", "error")


def study_methods() -> tuple[str, ...]:
    """`base` and every registered method, in the order reports list them."""
    return (BASE, *METHODS.names())


def write_condition(path: Path, record: dict[str, Any]) -> Path:
    """JSON with undefined values as null (a NaN would be a bug upstream, so it raises)."""
    return write_json(path, record)


# --------------------------------------------------------------------------- the study table


IDENTICAL = "identical"
"""The status of an arm identical by construction to another (`payoff.identities`): not trained; its
condition.json names the arm it equals (`identical_to`), whose results it reads."""


def read_condition(path: Path) -> dict[str, Any]:
    """A condition.json; an identical arm's comes back as the arm it equals (status, metrics and
    files), under its own condition labels and with `identical_to` kept."""
    data = _read_condition_file(path)
    if data["status"] != IDENTICAL:
        return data
    twin = condition_folder(path, data) / CONDITION_FILE
    if not twin.exists():
        return data | {"status": "failed", "error": f"identical to {data['identical_to']['folder']}, which has no "
                                                    f"{CONDITION_FILE} yet (run that condition first)"}
    return _read_condition_file(twin) | {"condition": data["condition"], "identical_to": data["identical_to"]}


def condition_folder(path: Path, data: dict[str, Any]) -> Path:
    """The folder that holds a condition's result files: its own, or an identical arm's twin's."""
    twin = data.get("identical_to")
    return (path.parent / twin["folder"]).resolve() if twin else path.parent


def _read_condition_file(path: Path) -> dict[str, Any]:
    data = read_json(path)  # missing, not UTF-8, not JSON, NaN: a UserError naming the file and line
    if not isinstance(data, dict) or not isinstance(data.get("condition"), dict) or "status" not in data:
        raise UserError(f"{path}: expected a condition.json with `condition` and `status` (from `hackable-rl condition`)")
    if data["status"] == IDENTICAL and not isinstance((data.get("identical_to") or {}).get("folder"), str):
        raise UserError(f"{path}: an identical arm's condition.json needs `identical_to.folder` (the arm it equals)")
    return data


def condition_row(data: dict[str, Any]) -> dict[str, Any]:
    """One table row: labels, then eval metrics by their own keys, then `train/<key>`."""
    condition = data["condition"]
    row = {
        "name": condition.get("name"),
        "method": condition.get("method"),
        "rate": condition.get("rate"),
        "seed": condition.get("seed"),
        "channel": condition.get("channel"),
        "flaw": condition.get("flaw"),
        "status": data["status"],
        "error": data.get("error"),
    }
    if condition.get("cell") is not None:  # a blind-spot study's cell; rate grids keep their columns
        row["cell"] = condition["cell"]
    row |= {key: value for key, value in (data.get("eval") or {}).items() if key not in ("run_name", "step")}
    row |= {f"train/{key}": value for key, value in (data.get("train") or {}).items()}
    return row


def find_condition_files(study_dir: Path) -> list[Path]:
    files = sorted(Path(study_dir).rglob(CONDITION_FILE))
    if not files:
        raise UserError(f"{study_dir}: no {CONDITION_FILE} below it; run the study's conditions first")
    return files


def collect_study(condition_files: Iterable[Path]) -> pd.DataFrame:
    """One row per condition, failed ones included, sorted by method, rate, flaw and seed."""
    rows = [condition_row(read_condition(path)) for path in condition_files]
    table = summary_table(rows)
    order = {method: index for index, method in enumerate(study_methods())}
    keys = table["method"].map(lambda m: order.get(m, len(order)))
    return (table.assign(_order=keys).sort_values(["_order", "rate", "flaw", "seed"], na_position="first")
            .drop(columns="_order").reset_index(drop=True))


def table_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts with undefined cells as None (JSON null), never NaN."""
    return [{key: _plain(value) for key, value in row.items()} for row in table.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_summary(table: pd.DataFrame, out_dir: Path) -> tuple[Path, Path]:
    """summary.csv (undefined cells blank) and summary.json (undefined cells null)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = write_summary_csv(table, out_dir / "summary.csv")
    json_path = out_dir / "summary.json"
    json_path.write_text(json.dumps(table_records(table), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return csv_path, json_path
