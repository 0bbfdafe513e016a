"""Per-step training metrics from one step's generation records (plain Python + NumPy)."""

from __future__ import annotations

from statistics import fmean
from typing import Any


def _mean(values: list[float]) -> float | None:
    """Mean of the defined values; None (not 0) when there are none."""
    defined = [float(v) for v in values if v is not None]
    return fmean(defined) if defined else None


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def step_metrics(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Observed and shaped reward, independent correctness, the online hacking gap, FP/FN rates,
    disagreement, missing/suppressed/down-weighted counts and lengths for one step."""
    observed = [r["aggregate"] for r in records]
    correct = [None if r["judge_correct"] is None else float(r["judge_correct"]) for r in records]
    scored = [(o, c) for o, c in zip(observed, correct, strict=True) if o is not None and c is not None]
    wrong = [o for o, c in scored if c == 0.0]
    right = [o for o, c in scored if c == 1.0]
    observed_on_scored = _mean([o for o, _ in scored])
    correct_on_scored = _mean([c for _, c in scored])
    return {
        "reward/observed": _mean(observed),
        "reward/optimised": _mean([r["optimised"] for r in records]),
        "reward/objective": _mean([r["final_reward"] for r in records]),
        "judge/correctness": _mean(correct),
        "hacking_gap": None if observed_on_scored is None else observed_on_scored - correct_on_scored,
        "verifier/false_positive_rate": _rate(sum(o >= 0.5 for o in wrong), len(wrong)),
        "verifier/false_negative_rate": _rate(sum(o < 0.5 for o in right), len(right)),
        "verifier/disagreement": _mean([r["U"] for r in records]),
        "verifier/missing": float(sum(r["missing"] for r in records)),
        "verifier/suppressed": float(sum(r["suppressed"] for r in records)),
        "verifier/down_weighted": float(sum(r["down_weighted"] for r in records)),
        "format/strict_share": _mean([float(r["strict"]) for r in records]),
        "length/completion_tokens": _mean([r["completion_tokens"] for r in records]),
    }
