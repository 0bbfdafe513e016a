"""Per-step training metrics from one step's generation records (plain Python + NumPy)."""

from __future__ import annotations

from hackable_rl.core.stats import hacking_gap, mean
from hackable_rl.scoring.records import GenerationRecord


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def step_metrics(records: list[GenerationRecord]) -> dict[str, float | None]:
    """Observed and shaped reward, independent correctness, the online hacking gap, FP/FN rates,
    disagreement, missing/suppressed/down-weighted counts and lengths for one step."""
    verifiers = [r.verifier for r in records]
    observed = [v.reward for v in verifiers]
    correct = [None if r.judgment.correct is None else float(r.judgment.correct) for r in records]
    scored = [(o, c) for o, c in zip(observed, correct, strict=True) if o is not None and c is not None]
    wrong = [o for o, c in scored if c == 0.0]
    right = [o for o, c in scored if c == 1.0]
    return {
        "reward/observed": mean(observed),
        "reward/optimised": mean(v.optimised_reward for v in verifiers),
        "reward/objective": mean(v.final_reward for v in verifiers),
        "judge/correctness": mean(correct),
        "hacking_gap": hacking_gap(observed, correct),
        "verifier/false_positive_rate": _rate(sum(o >= 0.5 for o in wrong), len(wrong)),
        "verifier/false_negative_rate": _rate(sum(o < 0.5 for o in right), len(right)),
        "verifier/disagreement": mean(v.disagreement["U"] for v in verifiers),
        "verifier/missing": float(sum(v.missing for v in verifiers)),
        "verifier/suppressed": float(sum(v.suppressed for v in verifiers)),
        "verifier/down_weighted": float(sum(v.down_weighted for v in verifiers)),
        "format/strict_share": mean(float(v.strict) for v in verifiers),
        "length/completion_tokens": mean(r.completion_tokens for r in records),
    }
