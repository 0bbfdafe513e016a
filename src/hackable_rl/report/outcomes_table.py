"""A study's declared outcomes as the report's table: each outcome's comparison, interval, raw and
Holm-adjusted p-value and verdict, with the amended family's rows where the study file records a
deviation (`outcomes_table`).
"""

from __future__ import annotations

from dataclasses import replace

from hackable_rl.report.conditions import ONE_WARM_START, OWN_WARM_STARTS
from hackable_rl.report.declared import AFFINE_DEVIATION, STUDY_INTERVAL, Outcome, has_deviation, with_holm

__all__ = ["fmt", "outcomes_table"]


def fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _verdict(outcome: Outcome) -> str:
    if outcome.affine and not outcome.affine_after_data:
        return f"affine to {outcome.b} by construction (not tested)"
    if outcome.affine:
        return f"{_raw(outcome)} (an affine twin: out of the amended family only)"
    if outcome.identical:
        return "identical by construction (not tested)"
    if outcome.secondary and outcome.met is not None:
        return f"{'met' if outcome.met else 'not met'} (secondary: not in the Holm family)"
    return _raw(outcome)


def _raw(outcome: Outcome) -> str:
    return _verdict_text(outcome.met)


def outcomes_table(outcomes: list[Outcome]) -> list[str]:
    """The outcomes as one markdown table, each outcome once."""
    interval = ONE_WARM_START if not outcomes or outcomes[0].interval_method == STUDY_INTERVAL else OWN_WARM_STARTS
    lines = [f"## Declared outcomes (paired by prompt and seed; {interval})", "",
             "| outcome | cell | A | B | metric | A | B | A - B [95% CI] | target | verdict | p | p (Holm) | "
             "verdict after Holm | sign test p | MDE (80% power) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in with_holm(outcomes):
        after = _verdict(o) if o.identical else "not adjusted (secondary)" if o.secondary else _after(o)
        lines.append(f"| {o.name} | {o.cell} | {o.a} | {o.b} | {o.metric} | {fmt(o.mean_a)} | {fmt(o.mean_b)} | "
                     f"{o.ci_text} | {o.target} | {_verdict(o)} | {_p(o.p_value)} | {_p(o.p_holm)} | {after} | "
                     f"{_p(o.sign_p)} | {fmt(o.mde)} |")
    identical = sorted({f"{o.a} and {o.b} in {o.cell}" for o in outcomes if o.identical and not o.affine})
    affine = sorted({f"{o.a} and {o.b} in {o.cell}" for o in outcomes if o.affine and not o.affine_after_data})
    family = sorted({o.name for o in outcomes if not o.secondary})
    tested = len({o.comparison for o in outcomes if o.in_family})
    return lines + ["", f"Holm's family is the declared one ({', '.join(family)}): the correction adjusts the p-values of "
                        f"every distinct comparison under those names whose target asks for a detected difference "
                        f"({tested} p-values here) "
                        "(equivalence targets are judged by their TOST; a comparison declared twice counts once). "
                        "Outcomes outside it are secondary: their raw verdict stands, and they are not adjusted. "
                        "The sign test (the share of replicates above 0 against a fair coin; no distribution "
                        "assumed) stands beside the t-test: at 5 replicates its smallest p is 0.0625. The MDE is the "
                        "smallest difference the t-test at 5% would detect with 80% power given the replicates' "
                        "spread: beside a null, the effect it could have seen.",
                    *(["", f"Identical by construction (every seed's difference exactly 0; listed, never tested): "
                        f"{'; '.join(identical)}."] if identical else []),
                    *(["", f"Affine by construction (A's reward a positive affine map of B's on every completion, "
                        f"so GRPO's centring and Adam's scaling train them alike; listed, never tested, out of "
                        f"Holm's family): {'; '.join(affine)}. {_with_affine_tested(outcomes)}"] if affine else []),
                    *_deviation_lines(outcomes)]


def _deviation_lines(outcomes: list[Outcome]) -> list[str]:
    """The amended family beside the declared one: which twins it drops, and which verdicts it changes."""
    if not has_deviation(outcomes):
        return []
    twins = sorted({f"{o.a} and {o.b} in {o.cell}" for o in outcomes if o.affine_after_data})
    adjusted = with_holm(outcomes)
    changed = [f"{o.name} ({o.cell}, {o.a} - {o.b}, {o.metric}): {_after(o)} -> "
               f"{_verdict_text(o.met_after_holm_amended)}, p (Holm) {_p(o.p_holm)} -> {_p(o.p_holm_amended)}"
               for o in adjusted if o.in_amended_family and o.met_after_holm != o.met_after_holm_amended]
    tested = len({o.comparison for o in outcomes if o.in_amended_family})
    return ["", f"**Deviation, after the data** (study.yaml `deviations`: {AFFINE_DEVIATION}): the affine twins "
                f"({'; '.join(twins)}) are arms whose rewards are a positive affine map of each other's, which GRPO's "
                f"centring and Adam's scaling train alike; the rule that takes them out of Holm's family was adopted "
                f"after this study ran, so the table above keeps them (the declared family), and the amended family "
                f"({tested} p-values) stands here, labelled. "
            + ("It changes these verdicts after Holm (declared -> amended): " + "; ".join(changed) + "."
               if changed else "It changes no verdict after Holm.")]


def _verdict_text(met: bool | None) -> str:
    return {True: "met", False: "not met", None: "undefined"}[met]


def _with_affine_tested(outcomes: list[Outcome]) -> str:
    """Which verdicts after Holm would read otherwise if the affine comparisons were tested too."""
    kept = with_holm(outcomes)
    tested = with_holm([replace(o, affine=False) for o in outcomes])
    changed = [f"{o.name} ({o.cell}, {o.a} - {o.b}, {o.metric}): {_after(t)} -> {_after(o)}, p (Holm) "
               f"{_p(t.p_holm)} -> {_p(o.p_holm)}"
               for o, t in zip(kept, tested, strict=True) if not o.affine and o.met_after_holm != t.met_after_holm]
    if not changed:
        return "Tested as well, they would change no verdict after Holm."
    return "Tested as well, they would change these verdicts after Holm (with them -> without them): " + "; ".join(changed) + "."


def _after(outcome: Outcome) -> str:
    return _verdict_text(outcome.met_after_holm)


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
