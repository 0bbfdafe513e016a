"""Report metrics: extra numbers computed over an evaluation's records, named in `evaluation.metrics`.

A report metric is a plain function `metric(records) -> float | None` over the evaluation records
(the JSON form of `records.EvaluationRecord`: `correct`, `parsed`, `reward`, `strict`, ...),
registered in REPORT_METRICS or given as `package.module:function`. Each configured one lands in
eval.json and MLflow as `report/<name>` and in report.md's evaluation table. None means undefined
(no records it applies to), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hackable_rl.core.registry import REPORT_METRICS, register_report_metric
from hackable_rl.core.stats import mean

__all__ = ["PREFIX", "report_metric_key", "compute_report_metrics"]

PREFIX = "report/"
Records = Sequence[Mapping[str, Any]]


@register_report_metric("strict_share")
def strict_share(records: Records) -> float | None:
    """Share of samples in the strict format (one thinking block, then one boxed answer)."""
    return mean(float(bool(r.get("strict"))) for r in records)


@register_report_metric("no_answer_share")
def no_answer_share(records: Records) -> float | None:
    """Share of samples from which the judge read no answer at all."""
    return mean(float(r.get("parsed") is None) for r in records)


def report_metric_key(name: str) -> str:
    """`report/<name>`; a `package.module:attr` is named by its last attribute."""
    return PREFIX + name.rpartition(":")[2].rpartition(".")[2]


def compute_report_metrics(records: Records, names: Sequence[str]) -> dict[str, float | None]:
    """Every metric in `names` over `records`, keyed `report/<name>`."""
    return {report_metric_key(name): REPORT_METRICS.get(name)(records) for name in names}
