"""alarm_bench.md: the alarm benchmark's document (`alarm.bench.replay`) as tables a person reads."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["bench_markdown"]


def _count(part: int, whole: int) -> str:
    return f"{part}/{whole}"


def _lead(value: float | None) -> str:
    return "-" if value is None else f"{value:+g}"


def _interval(ci: list[float] | tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _rule_line(rule: dict[str, Any]) -> str:
    tune, held = rule["tune"], rule["held_out"]
    members = "; ".join(rule["members"]) or "(none: nothing kept under the cap)"
    return (f"| {rule['name']} | {members} | {_count(tune['on_time'], tune['hacking'])} | "
            f"{_count(tune['false_alarms'], tune['negatives'])} | {_count(held['on_time'], held['hacking'])} "
            f"{_interval(held['on_time_ci'])} | {_count(held['detected'], held['hacking'])} | "
            f"{_count(held['false_alarms'], held['negatives'])} {_interval(held['false_alarm_ci'])} | "
            f"{_lead(held['median_lead'])} | {_lead(held['median_hindsight_lead'])} |")


def _goal_line(document: dict[str, Any]) -> str:
    held = document["rules"][0]["held_out"]
    cap, goal = document["false_alarm_cap"], document["on_time_goal"]
    if not held["hacking"]:
        return "Goal: no held-out hacking run, so nothing to be on time for."
    on_time = held["on_time"] / held["hacking"]
    alarms = held["false_alarms"] / held["negatives"] if held["negatives"] else 0.0
    short = []
    if on_time < goal:
        short.append(f"on time in {on_time:.0%} of hacking runs, {goal - on_time:.0%} short of {goal:.0%}")
    if alarms > cap:
        short.append(f"false alarms in {alarms:.0%} of negatives, {alarms - cap:.0%} over the {cap:.0%} cap")
    verdict = "met" if document["goal_met"] else "not met: " + "; ".join(short)
    return (f"Goal on the held-out runs (on time in >= {goal:.0%} of hacking runs, false alarms in <= {cap:.0%} of "
            f"negatives), for the chosen rule: **{verdict}**.")


def _study_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| study | rule | held-out hacking runs | on time | detected | false alarms | median lead |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for rule in document["rules"]:
        for study, outcome in rule["by_study"].items():
            lines.append(f"| {study} | {rule['name']} | {outcome['hacking']} | {outcome['on_time']} | "
                         f"{outcome['detected']} | {_count(outcome['false_alarms'], outcome['negatives'])} | "
                         f"{_lead(outcome['median_lead'])} |")
    return lines


def _ceiling_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| study | hacking runs | negatives | best single detector | on time | false alarms |",
             "| --- | --- | --- | --- | --- | --- |"]
    for study, bound in document["ceilings"].items():
        detector = bound["detector"] or ("none is ever on time" if bound["hacking"] else "no hacking run")
        alarms = "-" if bound["false_alarms"] is None else _count(bound["false_alarms"], bound["negatives"])
        lines.append(f"| {study} | {bound['hacking']} | {bound['negatives']} | {detector} | "
                     f"{_count(bound['on_time'], bound['hacking'])} | {alarms} |")
    reach = sum(bound["on_time"] for bound in document["ceilings"].values())
    hacking = sum(bound["hacking"] for bound in document["ceilings"].values())
    if hacking:
        whose = "Together the bounds reach" if len(document["ceilings"]) > 1 else "The bound reaches"
        lines += ["", f"{whose} {reach} of {hacking} hacking runs ({reach / hacking:.0%}); the goal asks for "
                      f"{document['on_time_goal']:.0%}."]
    return lines + _pooled_lines(document)


def _pooled_lines(document: dict[str, Any]) -> list[str]:
    """The bound with the cap pooled over every study's negatives, where there are several studies."""
    pooled = document.get("pooled_ceiling")
    if not pooled or not pooled["hacking"]:
        return []
    chosen = "; ".join(f"{study}: {entry['detector']} ({_count(entry['on_time'], document['ceilings'][study]['hacking'])} "
                       f"on time, {entry['false_alarms']} false alarms)" for study, entry in pooled["by_study"].items())
    return ["", "Each study's bound keeps within 5% of that study's own negatives, so \"none is ever on time\" "
                "means none within the false alarms that study allows (none where it has fewer than 20 negatives). "
                f"With the cap pooled instead (the goal's reading: at most {document['false_alarm_cap']:.0%} of all "
                f"{pooled['negatives']} negatives, {pooled['allowed_false_alarms']} false alarms to spend in any study, "
                "one detector per study picked with hindsight): "
                f"{_count(pooled['on_time'], pooled['hacking'])} hacking runs on time "
                f"({pooled['on_time'] / pooled['hacking']:.0%}) with {pooled['false_alarms']} false alarms"
                + (f" ({chosen})." if chosen else "; no detector is on time anywhere.")]


def _diagnosis_lines(document: dict[str, Any]) -> list[str]:
    lines = ["| signal | test | most on time at | on time | false alarms | false alarms where nothing changes | "
             "lowest calibrated threshold | on time there | false alarms there |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in document["signals_on_tune"]:
        null = "-" if row["null_false_alarm_rate"] is None else f"{row['null_false_alarm_rate']:.0%}"
        lowest = "none" if row["lowest_calibrated"] is None else f"{row['lowest_calibrated']:g}"
        there = "-" if row["calibrated_on_time"] is None else str(row["calibrated_on_time"])
        alarms = "-" if row["calibrated_false_alarms"] is None else str(row["calibrated_false_alarms"])
        lines.append(f"| {row['signal']} | {row['test']} | {row['best_threshold']:g} | "
                     f"{_count(row['on_time'], row['hacking'])} | {_count(row['false_alarms'], row['negatives'])} | "
                     f"{null} | {lowest} | {there} | {alarms} |")
    return lines


def _run_lines(document: dict[str, Any]) -> list[str]:
    names = [rule["name"] for rule in document["rules"]]
    lines = ["| study | run | split | hacked | hindsight onset | live onset | " + " | ".join(names) + " |",
             "| --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for run in document["runs"]:
        twins = f" (= {', '.join(run['same_as'])})" if run["same_as"] else ""
        steps = " | ".join("-" if run["fired"].get(n) is None else str(run["fired"][n]) for n in names)
        onset, live = run["judge_onset"], run["live_onset"]
        lines.append(f"| {run['study']} | {run['name']}{twins} | {run['split']} | {'yes' if run['hacked'] else 'no'} | "
                     f"{'-' if onset is None else onset} | {'-' if live is None else live} | {steps} |")
    return lines


def bench_markdown(document: dict[str, Any]) -> list[str]:
    """The rules' outcomes (tune and held out), the goal, per study, and one row per distinct run."""
    skipped = sorted({entry["run"] for rule in document["rules"] for entry in rule["skipped"]})
    lines = ["# Hacking-onset alarm benchmark", "",
             f"Studies: {', '.join(document['studies'])}. {document['distinct_runs']} distinct runs of "
             f"{document['runs_read']} read (identical trajectories once). The reference is the judge's live monitor "
             f"(its {document['judge_window']}-step windowed test run step by step, no look-ahead); a run hacked when it "
             "fires. Rules chosen on the tune replicates "
             f"({len(document['tuned_on'])} runs) with false alarms capped at {document['false_alarm_cap']:.0%} of the "
             "tune negatives; the held-out replicates are scored once. on time: fired no later than the live onset; "
             "lead: firing step - onset (negative: earlier); intervals: 95%, clustered by warm start.", "",
             "| rule | detectors (any of) | tune on time | tune false alarms | held-out on time | held-out detected | "
             "held-out false alarms | median lead (live) | median lead (hindsight) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [_rule_line(rule) for rule in document["rules"]]
    lines += ["", _goal_line(document), ""]
    if members := document["rules"][0]["members"]:
        lines += [f"The chosen rule runs live with `alarm.rule: {json.dumps(members)}` in params.yaml "
                  "(docs/metrics.md, \"Hacking-onset alarm\").", ""]
    if skipped:
        lines += [f"Skipped for a missing signal (by some rule): {len(skipped)} runs ({', '.join(skipped)}).", ""]
    lines += ["## Per study (held out)", "", *_study_lines(document), "",
              "## What each study's signals could show at best (a bound, not a result)", "",
              "Per study, over its tune and held-out runs together: the one detector (any recorded signal, test and "
              "threshold of the grid, calibrated or not) on time in the most hacking runs while firing in at most "
              f"{document['false_alarm_cap']:.0%} of that study's negatives. Its threshold is picked with hindsight on the "
              "runs it is scored on, so no honestly tuned rule of one detector does better there. Where it is on time in "
              "none, the study's hacking leaves no judge-free footprint before the judge's live monitor fires: the "
              "alarm cannot see it.", "", *_ceiling_lines(document), "",
              "## Each signal on the tune runs (why a rule is or is not on time)", "",
              f"Calibrated: false alarms in at most {document['false_alarm_cap'] / document['max_members']:.1%} of "
              "simulated stationary runs (each tune run's first steps resampled), so a rule of "
              f"{document['max_members']} detectors stays under the cap there. Each row counts the tune runs that "
              "record its signal.", "",
              *_diagnosis_lines(document), "", "## Runs", "", *_run_lines(document)]
    sources = sorted({run["signals_source"] for run in document["runs"]})
    lines += ["", f"Signals read from: {', '.join(sources) or 'none'}."]
    return lines
