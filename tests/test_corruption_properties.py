"""Property tests: corruption is a pure function of its keys; rates hold; ranges hold; missing stays missing."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hackable_rl.config.loading import validate_config
from hackable_rl.reward import Example, clean_checker
from hackable_rl.reward.channels import Flip
from hackable_rl.reward.corruption import KeyedChannel, corrupt
from hackable_rl.reward.ensemble import aggregate, disagreement
from hackable_rl.reward.pipeline import build_reward_pipeline

ANSWERS = st.integers(min_value=0, max_value=30).map(str)
COMPLETIONS = st.one_of(
    ANSWERS.map(lambda a: f"<think>t</think> \\boxed{{{a}}}"),
    ANSWERS.map(lambda a: f"<think>t</think> \\boxed{{{a}}} \\boxed{{{a}}}"),
    st.text(max_size=30),
)
ROWS = st.lists(st.tuples(COMPLETIONS, st.sampled_from(["q1", "q2", "q3"]), ANSWERS), min_size=1, max_size=20)
CHANNELS = ["flip", "asymmetric", "missing", "noise", "bias", "confidence", "flaw"]


def _config(channel: str, rate: float, method: str = "baseline"):
    members = [{"name": "a"}, {"name": "b"}, {"name": "c", "checker": "any_box"}]
    return validate_config(
        {
            "method": method,
            "verifier": {"members": members},
            "corruption": {"channel": channel, "rate": rate, "kwargs": {"selector": "n >= 1"} if channel == "bias" else {}},
        }
    )


def _score(pipeline, rows):
    completions = [row[0] for row in rows]
    batch = pipeline.score(
        completions,
        ["p"] * len(rows),
        [row[1] for row in rows],
        [row[2] for row in rows],
        [{"n": 1}] * len(rows),
    )
    return SimpleNamespace(rewards=batch.rewards, records=[record.to_json() for record in batch.records])


@settings(max_examples=40, deadline=None)
@given(rows=ROWS, channel=st.sampled_from(CHANNELS), rate=st.floats(0.0, 1.0), seed=st.integers(0, 1000))
def test_corruption_is_independent_of_order_and_batch_size(rows, channel, rate, seed) -> None:
    pipeline = build_reward_pipeline(_config(channel, rate))
    whole = _score(pipeline, rows).records
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    shuffled = _score(pipeline, [rows[i] for i in order]).records
    singles = [_score(pipeline, [row]).records[0] for row in rows]
    keys = [key for key in whole[0] if key.startswith("member.")]
    for position, i in enumerate(order):
        assert [shuffled[position][k] for k in keys] == [whole[i][k] for k in keys]
        assert [singles[i][k] for k in keys] == [whole[i][k] for k in keys]


@settings(max_examples=5, deadline=None)
@given(rate=st.sampled_from([0.05, 0.2, 0.4, 0.6]), seed=st.integers(0, 10_000))
def test_empirical_flip_rate_within_binomial_tolerance(rate, seed) -> None:
    n = 20_000
    checker = corrupt(clean_checker, KeyedChannel(Flip(rate), seed=seed, member="m0"))
    completion = "<think>3+4=7</think> \\boxed{7}"
    flips = sum(checker(completion, Example(f"q{i}", "7", {})).reward == 0.0 for i in range(n))
    tolerance = 5 * math.sqrt(n * rate * (1 - rate))  # five standard deviations
    assert abs(flips - n * rate) <= tolerance


@settings(max_examples=30, deadline=None)
@given(
    rows=ROWS,
    channel=st.sampled_from(CHANNELS),
    rate=st.floats(0.0, 1.0),
    method=st.sampled_from(["baseline", "robust"]),
)
def test_rewards_stay_in_range(rows, channel, rate, method) -> None:
    batch = _score(build_reward_pipeline(_config(channel, rate, method)), rows)
    for record in batch.records:
        for key, value in record.items():
            if key.startswith("member.") and key.endswith(("reward", "confidence")) and value is not None:
                assert 0.0 <= value <= 1.0
        for key in (
            "reward",
            "U",
            "normalised_disagreement",
            "vote_entropy",
            "mean_confidence",
            "robust_aggregate",
        ):  # robust_aggregate and shaped: the columns robust hands back (absent under another method)
            assert record.get(key) is None or 0.0 <= record[key] <= 1.0 + 1e-12
        assert record.get("shaped") is None or -0.5 - 1e-12 <= record["shaped"] <= 1.0 + 1e-12
        assert 0.0 <= record["format_tag_reward"] <= 1.0
    assert all(math.isfinite(value) for value in batch.rewards)


@settings(max_examples=60, deadline=None)
@given(
    rewards=st.lists(
        st.lists(st.one_of(st.none(), st.floats(0.0, 1.0)), min_size=1, max_size=5), min_size=1, max_size=6
    ).filter(lambda rows: len({len(row) for row in rows}) == 1),
    method=st.sampled_from(["mean", "majority", "confidence_weighted", "min"]),
)
def test_missing_stays_missing_through_aggregation(rewards, method) -> None:
    matrix = np.array([[math.nan if value is None else value for value in row] for row in rewards])
    confidences = np.ones_like(matrix)
    aggregated = aggregate(matrix, confidences, method)
    spread = disagreement(matrix, confidences)
    for i, row in enumerate(rewards):
        all_missing = all(value is None for value in row)
        assert math.isnan(aggregated[i]) is all_missing
        assert math.isnan(spread.u[i]) is all_missing
        if not all_missing:
            present = [value for value in row if value is not None]
            assert min(present) - 1e-12 <= aggregated[i] <= max(present) + 1e-12 or method == "majority"


@settings(max_examples=20, deadline=None)
@given(rows=ROWS)
def test_missing_channel_record_stays_missing(rows) -> None:
    batch = _score(build_reward_pipeline(_config("missing", 1.0, "robust")), rows)
    for record in batch.records:
        assert record["missing"] and record["reward"] is None and record["shaped"] is None
