"""Seed statistics over a study table: mean, sample sd (ddof 1) and n per series and rate.

A *series* is a method, or `method (flaw)` when the table holds more than one flaw or channel,
so that conditions run against different verifiers are never averaged together.
"""

from __future__ import annotations

import pandas as pd

CORRECTNESS = "pass_at_1"
"""Independent correctness: mean per-prompt share of judge-correct samples (spec section 6)."""


def with_series(table: pd.DataFrame) -> pd.DataFrame:
    """Adds `verifier` (channel, or channel/flaw) and `series` (method, plus the verifier when several)."""
    flaw = table["flaw"].where(table["flaw"].notna(), "")
    verifier = table["channel"].astype(str) + flaw.map(lambda f: f"/{f}" if f else "")
    several = verifier.nunique() > 1
    series = table["method"].astype(str) + (" (" + verifier + ")" if several else "")
    return table.assign(verifier=verifier, series=series)


def ok_rows(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"] == "ok"]


def seed_stats(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per (verifier, method, series, rate): mean, sd and n over seeds of `metric`, ok conditions
    with a defined value only. sd is NaN for a single seed (undefined, shown as such)."""
    columns = ["verifier", "method", "series", "rate", "mean", "sd", "n"]
    if metric not in table.columns:
        return pd.DataFrame(columns=columns)
    rows = with_series(ok_rows(table)).dropna(subset=[metric])
    if rows.empty:
        return pd.DataFrame(columns=columns)
    values = rows.assign(_value=rows[metric].astype(float))
    grouped = values.groupby(["verifier", "method", "series", "rate"])["_value"]
    stats = grouped.agg(mean="mean", sd="std", n="count").reset_index()
    return stats[columns]


def slope(rates: pd.Series, values: pd.Series) -> float | None:
    """Least-squares slope of values against rate; None with fewer than two distinct rates."""
    x, y = rates.astype(float), values.astype(float)
    if x.nunique() < 2:
        return None
    dx = x - x.mean()
    return float((dx * (y - y.mean())).sum() / (dx * dx).sum())
