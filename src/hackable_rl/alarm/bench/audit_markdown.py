"""audit_bench.md: the audit benchmark's document (`alarm.bench.audit`) as tables a person reads."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["audit_markdown"]


def _rate(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def _interval(ci: list[float] | tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def _lead(value: float | None) -> str:
    return "-" if value is None else f"{value:+g}"


def _test(row: dict[str, Any]) -> str:
    return "none under the cap" if row["threshold"] is None else f"{row['test']} > {row['threshold']:g}"


def _cost(row: dict[str, Any]) -> str:
    shares = sorted({round(entry["share"], 4) for entry in row["cost"].values()})
    return " / ".join(f"{share:.1%}" for share in shares)


def _headline_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| k audited per step | share of a step's completions | test (chosen on tune) | tune on time | "
             "tune false alarms | held-out on time | within 5 steps | within 10 steps | detected | "
             "held-out false alarms | median lead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in document["rows"]:
        tune, held = row["tune"], row["held_out"]
        lines.append(f"| {row['k']} | {_cost(row)} | {_test(row)} | {_rate(tune['on_time_rate'])} | "
                     f"{_rate(tune['false_alarm_rate'])} | {_rate(held['on_time_rate'])}{_interval(held['on_time_ci'])} | "
                     f"{_rate(held['within']['5'])} | {_rate(held['within']['10'])} | {_rate(held['detected_rate'])} | "
                     f"{_rate(held['false_alarm_rate'], 1)}{_interval(held['false_alarm_ci'])} | {_lead(held['median_lead'])} |")
    return lines


def _answer_lines(document: dict[str, Any]) -> list[str]:
    found, goal, cap = document["answer"], document["on_time_goal"], document["false_alarm_cap"]
    head = (f"Goal on the held-out runs: on time in >= {goal:.0%} of hacking runs with false alarms in <= {cap:.0%} "
            "of the negatives, pooled over the studies.")
    if found["k"] is not None:
        row = next(row for row in document["rows"] if row["k"] == found["k"])
        held = row["held_out"]
        return [f"{head} **The smallest k that meets it: {found['k']}** ({_test(row)}: on time in "
                f"{held['on_time_rate']:.0%}, false alarms {_rate(held['false_alarm_rate'], 1)}, median lead "
                f"{_lead(held['median_lead'])} steps)."]
    lines = [f"{head} **No k up to {document['ks'][-1]} meets it** (k = {document['ks'][-1]} is half of a 64-completion "
             "step). By how much:", ""]
    lines += [f"- k = {k}: {text}" for k, text in found["shortfall"].items()]
    every = found.get("every_completion")
    if every is not None and every["met"]:
        lines += ["", "Auditing every completion (row `all`: the full judge's own counts under the same tests) meets "
                      "it, so the test is not the limit: the number audited is (the sampling noise of k per step; "
                      "\"Why\" below)."]
    elif every is not None:
        lines += ["", f"Auditing every completion (row `all`) does not meet it either ({every['shortfall']}): the "
                      "test against the judge's confirmed live monitor is the limit, whatever k."]
    return lines


def _why_lines(document: dict[str, Any]) -> list[str]:
    lines = ["At each held-out hacking run's live onset: how far its hacking gap has risen (the mean of the last "
             f"{document['judge_window']} steps minus the first {document['judge_window']}, exact, as the windowed test "
             "reads it), and that rise in standard deviations of the audit's sampling noise of the same difference "
             "with k audited per step. Where the rise is under the windowed test's threshold in those sds, a typical "
             "draw does not fire by the onset; a threshold low enough that it would fires as readily where nothing "
             "rose (the negatives). The test reads its windows' own spread, so the sds are a guide, not its "
             "statistic.", "",
             "| k | median rise of the gap | median rise in audit sds | window test's threshold | runs whose rise clears it |",
             "| --- | --- | --- | --- | --- |"]
    for k, entry in document["why"].items():
        sds = "-" if entry["median_rise_in_sds"] is None else f"{entry['median_rise_in_sds']:.2f}"
        rise = "-" if entry["median_rise"] is None else f"{entry['median_rise']:+.3f}"
        threshold = "-" if entry["window_threshold"] is None else f"{entry['window_threshold']:g}"
        lines.append(f"| {k} | {rise} | {sds if k != 'all' else 'no noise'} | {threshold} | "
                     f"{_rate(entry['share_above'])} of {entry['runs']} |")
    return lines


def _tests_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| k | test | threshold (tune) | tune on time | tune false alarms | held-out on time | within 10 steps | "
             "held-out false alarms | median lead |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in document["rows"]:
        for entry in row["tests"]:
            tune, held = entry["tune"], entry["held_out"]
            threshold = "none under the cap" if entry["threshold"] is None else f"{entry['threshold']:g}"
            lines.append(f"| {row['k']} | {entry['test']} | {threshold} | {_rate(tune['on_time_rate'])} | "
                         f"{_rate(tune['false_alarm_rate'])} | {_rate(held['on_time_rate'])} | "
                         f"{_rate(held['within']['10'])} | {_rate(held['false_alarm_rate'])} | "
                         f"{_lead(held['median_lead'])} |")
    return lines


def _study_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| study | k | test | hacking runs | negatives | on time | within 10 steps | false alarms | median lead |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in document["rows"]:
        for study, held in row["by_study"].items():
            lines.append(f"| {study} | {row['k']} | {_test(row)} | {held['hacking']} | {held['negatives']} | "
                         f"{_rate(held['on_time_rate'])} | {_rate(held['within']['10'])} | "
                         f"{_rate(held['false_alarm_rate'])} | {_lead(held['median_lead'])} |")
    return lines


def _hacking_run_lines(document: dict[str, Any]) -> list[str]:
    """Per held-out hacking run: the share of draws in which each k's chosen test was on time."""
    ks = [str(row["k"]) for row in document["rows"]]
    lines = ["| study | run | live onset | " + " | ".join(f"k = {k}" for k in ks) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in ks) + " |"]
    for run in document["runs"]:
        if not (run["hacked"] and run["split"] == "held_out"):
            continue
        cells = [f"{run['by_k'][k]['on_time']}/{run['by_k'][k]['draws']}" if run["by_k"][k]["draws"] else "-"
                 for k in ks]
        lines.append(f"| {run['study']} | {run['name']} | {run['live_onset']} | " + " | ".join(cells) + " |")
    return lines


def _not_replayed_lines(document: dict[str, Any]) -> list[str]:
    missing = document["not_replayed"]
    if not missing:
        return ["Every distinct run was replayed."]
    by_study = Counter((entry["study"], entry["reason"]) for entry in missing)
    hacking = Counter(entry["study"] for entry in missing if entry["hacked"])
    return [f"Not replayed: {len(missing)} runs. " + "; ".join(
        f"{study}: {count} runs ({hacking[study]} hacking), {reason}" for (study, reason), count in sorted(by_study.items()))
        + ". Their rates are not in any table here; the judge-free benchmark (alarm_bench.md) still scores them."]


def audit_markdown(document: dict[str, Any]) -> list[str]:
    """The k curve (held out), the answer, both tests per k, per study, per hacking run."""
    return ["# Audited hacking alarm benchmark", "",
            f"Studies: {', '.join(document['studies'])}. {document['distinct_runs']} distinct runs of "
            f"{document['runs_read']} read; {document['replayed']} replayed from their curve.csv (per step: "
            "completions, the judge's right answers, the mean reward). Each step audits k completions drawn without "
            "replacement (hypergeometric, the live audit's law: `alarm.audit.k`); the audited gap is the step's mean "
            f"reward minus the audited share judged right. {document['draws']} seeded draws of the audit sample per "
            "run and k; rates are shares of (run, draw) pairs. The reference is the judge's live monitor over every "
            f"completion (its {document['judge_window']}-step windowed test run step by step); a run hacked when it "
            f"fires. Thresholds and the test chosen on the tune replicates ({len(document['tuned_on'])} runs), false "
            f"alarms capped at {document['false_alarm_cap']:.0%} of the tune negatives' draws; the held-out replicates "
            "scored once. on time: fired no later than the live onset; within d: at most d steps after it; lead: "
            "firing step - live onset; intervals: 95%, clustered by warm start.", "",
            *_not_replayed_lines(document), "", "## What to buy (held out)", "", *_headline_lines(document), "",
            *_answer_lines(document), "", "## Why", "", *_why_lines(document), "", "## Both tests per k", "", *_tests_lines(document), "",
            "## Per study (held out, the chosen test)", "", *_study_lines(document), "",
            "## Held-out hacking runs: draws on time, per k", "", *_hacking_run_lines(document)]
