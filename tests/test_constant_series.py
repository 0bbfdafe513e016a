"""Flat diagnostic series stay out of MLflow's charts until they change; the headline curves come first."""

from __future__ import annotations

import math

from hackable_rl.tracking.views import chart_names
from hackable_rl.training.constant_series import ConstantSeries, constant_tags, released_in


def _rows(values: dict[str, list[float]]) -> list[dict]:
    steps = len(next(iter(values.values())))
    return [{"step": step + 1, **{key: series[step] for key, series in values.items()}} for step in range(steps)]


def _flush(splitter: ConstantSeries, history: list[dict], steps: range) -> list[tuple[int, dict]]:
    pending = [(row["step"], {k: v for k, v in row.items() if k != "step"}) for row in history if row["step"] in steps]
    return splitter.points_to_send(pending, [row for row in history if row["step"] <= steps[-1]])


def _series(sent: list[tuple[int, dict]]) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for step, row in sent:
        for key, value in row.items():
            series.setdefault(key, []).append((step, value))
    return {key: sorted(points) for key, points in series.items()}


def test_a_flat_diagnostic_is_held_back_and_becomes_a_tag_while_measurements_are_always_sent():
    history = _rows({"trl/loss": [0.0] * 4, "judge/correctness": [0.5] * 4, "trl/entropy": [1.0, 0.9, 0.8, 0.7]})
    splitter = ConstantSeries()
    sent = _series(_flush(splitter, history, range(1, 3)) + _flush(splitter, history, range(3, 5)))
    assert sent == {"judge/correctness": [(1, 0.5), (2, 0.5), (3, 0.5), (4, 0.5)],  # a flat judge is a finding
                    "trl/entropy": [(1, 1.0), (2, 0.9), (3, 0.8), (4, 0.7)]}
    assert constant_tags(history, splitter.released) == {"constant.trl/loss": 0.0}


def test_a_diagnostic_that_changes_later_gets_its_earlier_points_once():
    history = _rows({"verifier/missing": [0.0, 0.0, 0.0, 2.0, 0.0]})
    splitter = ConstantSeries()
    first = _series(_flush(splitter, history, range(1, 3)))  # steps 1-2: flat so far
    second = _series(_flush(splitter, history, range(3, 6)))  # step 4 changes it: steps 1-3 go out with it
    assert first == {}
    assert second == {"verifier/missing": [(1, 0.0), (2, 0.0), (3, 0.0), (4, 2.0), (5, 0.0)]}
    assert constant_tags(history, splitter.released) == {}


def test_undefined_values_do_not_make_a_series_vary():
    history = _rows({"verifier/false_positive_rate": [0.0, None, math.nan, 0.0]})
    splitter = ConstantSeries()
    sent = _series(_flush(splitter, history, range(1, 5)))
    assert all(not math.isfinite(value) for _, value in sent.get("verifier/false_positive_rate", []) if value is not None)
    assert constant_tags(history, splitter.released) == {"constant.verifier/false_positive_rate": 0.0}


def test_a_restart_remembers_the_diagnostics_its_event_log_shows_sent():
    events = [{"event": "metrics", "step": 3, "data": {"trl/loss": 0.1, "judge/correctness": 0.5}},
              {"event": "params", "data": {"trl/loss": "x"}}]
    splitter = ConstantSeries(released_in(events))
    history = _rows({"trl/loss": [0.1, 0.1]})
    assert _flush(splitter, history, range(1, 3)) == [(1, {"trl/loss": 0.1}), (2, {"trl/loss": 0.1})]


def test_the_training_gap_is_charted_in_the_headline_section_and_nothing_else_is_renamed():
    assert chart_names({"hacking_gap": 0.1, "judge/correctness": 0.5}) == {
        "Headline/hacking_gap": 0.1, "judge/correctness": 0.5}
