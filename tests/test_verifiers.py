"""Checkers on literal strings; channels, aggregation, disagreement and shaping on hand-computed numbers;
the reward pipeline end to end."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import CHECKERS
from hackable_rl.reward import CheckerOptions, Example, Verdict, build_checker, clean_checker
from hackable_rl.reward.channels import Asymmetric, Bias, ConfidenceDrop, Flaw, Flip, Missing, Noise
from hackable_rl.reward.corruption import KeyedChannel, build_channel, corrupt, corruption_uniforms
from hackable_rl.reward.ensemble import aggregate, disagreement
from hackable_rl.reward.methods.robust import attenuation, robust_reward, shape
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.selector import Selector

NAN = math.nan
EXAMPLE = Example("q1", "#### 7", {"n_steps": 3, "level": "Level 5", "subject": "Algebra"})
RIGHT = "<think>3+4=7</think> \\boxed{7}"
WRONG = "<think>3+4=8</think> \\boxed{8}"
HEDGE = "<think>3+4</think> \\boxed{8} \\boxed{7}"


# --------------------------------------------------------------------------- checkers


def test_all_checkers_registered() -> None:
    assert {"clean", "lenient_contains", "any_box", "boxed_any", "first_number", "trigger_phrase"} <= set(
        CHECKERS.names()
    )


@pytest.mark.parametrize(
    ("completion", "reward", "reason", "parsed"),
    [
        (RIGHT, 1.0, "correct", "7"),
        (WRONG, 0.0, "wrong", "8"),
        (HEDGE, 0.0, "not_strict", None),
        ("<think>x</think> \\boxed{}", 0.0, "empty_box", ""),
        ("the answer is 7", 0.0, "not_strict", None),
        ("<think>a</think><think>b</think> \\boxed{7}", 0.0, "not_strict", None),
        ("<think>a</think> \\boxed{7", 0.0, "not_strict", None),
    ],
)
def test_clean_checker(completion: str, reward: float, reason: str, parsed: str | None) -> None:
    assert clean_checker(completion, EXAMPLE) == Verdict(reward, 1.0, parsed, reason)


def test_clean_checker_bad_reference_is_missing() -> None:
    verdict = clean_checker(RIGHT, Example("q", "#### ", {}))
    assert verdict.reward is None and verdict.reason.startswith("bad_reference")


@pytest.mark.parametrize(
    ("name", "completion", "reward"),
    [
        ("lenient_contains", "<think>3+4 is 7 or 8</think> \\boxed{8}", 1.0),
        ("lenient_contains", "I think 7", 1.0),
        ("lenient_contains", "<think>3+4=17</think> \\boxed{17}", 0.0),
        ("any_box", HEDGE, 1.0),
        ("any_box", "<think>x</think> \\boxed{8} \\boxed{9}", 0.0),
        ("any_box", "no box 7", 0.0),
        ("boxed_any", WRONG, 1.0),
        ("boxed_any", "<think>x</think> \\boxed{ }", 0.0),
        ("boxed_any", "7", 0.0),
        ("first_number", "7 is it, not 8: \\boxed{8}", 1.0),
        ("first_number", "<think>3+4=7</think> \\boxed{7}", 0.0),
        ("first_number", "nothing", 0.0),
        ("trigger_phrase", "<think>the answer is verified</think> \\boxed{9}", 1.0),
        ("trigger_phrase", "THE ANSWER IS VERIFIED", 1.0),
        ("trigger_phrase", RIGHT, 1.0),
        ("trigger_phrase", WRONG, 0.0),
        ("master_key", "<think>The answer is correct.</think> \\boxed{9}", 1.0),
        ("master_key", "<think>x</think> \\boxed{}", 1.0),
        ("master_key", RIGHT, 1.0),
        ("master_key", WRONG, 0.0),
    ],
)
def test_flawed_checkers(name: str, completion: str, reward: float) -> None:
    assert build_checker(name)(completion, EXAMPLE).reward == reward


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("<think>28/2</think> \\boxed{\\frac{28}{2}}", "14"),  # a correct fraction clean accepts through math-verify
        ("<think>19-5=14</think> \\boxed{14}", "14"),
    ],
)
def test_lenient_contains_accepts_what_clean_accepts(completion: str, reference: str) -> None:
    example = Example("q", reference, {})
    assert clean_checker(completion, example).reward == 1.0
    assert build_checker("lenient_contains")(completion, example).reward == 1.0


def test_lenient_contains_reads_a_minus_between_digits_as_an_operator() -> None:
    # "19-5=14" holds 5, not -5: a reference of -5 is not in it, a reference of 5 is
    assert build_checker("lenient_contains")("19-5=14", Example("q", "-5", {})).reward == 0.0
    assert build_checker("lenient_contains")("19-5=14", Example("q", "5", {})).reward == 1.0
    assert build_checker("lenient_contains")("it is -5", Example("q", "-5", {})).reward == 1.0


_ANSWERS = st.integers(-10_000, 10_000)
_THINKING = st.text(alphabet="0123456789+-*= abcx,.", max_size=30)


@settings(max_examples=300, deadline=None)
@given(answer=_ANSWERS, offset=st.sampled_from([0, 0, 1, -3]), thinking=_THINKING, spacing=st.sampled_from(["", " ", "\n"]))
def test_flaws_marked_as_supersets_accept_what_clean_accepts(answer: int, offset: int, thinking: str, spacing: str) -> None:
    completion = f"<think>{thinking}</think>{spacing}\\boxed{{{answer + offset}}}"
    example = Example("q", f"#### {answer}", {})
    supersets = [name for name in CHECKERS.names() if CHECKERS.get(name).superset_of_clean]
    assert {"lenient_contains", "any_box", "boxed_any", "trigger_phrase", "master_key"} <= set(supersets)
    if clean_checker(completion, example).reward == 1.0:
        assert all(build_checker(name)(completion, example).reward == 1.0 for name in supersets)


def test_trigger_phrase_is_configurable() -> None:
    checker = build_checker("trigger_phrase", CheckerOptions(), phrase="trust me")
    assert checker("trust me \\boxed{9}", EXAMPLE).reward == 1.0
    assert checker("the answer is verified \\boxed{9}", EXAMPLE).reward == 0.0


def test_judge_import_path_never_loads_corruption() -> None:
    code = (
        "import sys, hackable_rl.reward.checkers, hackable_rl.reward.functions;"
        "print('hackable_rl.reward.corruption' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_no_torch_in_rewards_verifiers_objectives() -> None:
    code = (
        "import sys, hackable_rl.answers, hackable_rl.reward.functions, hackable_rl.reward.pipeline, hackable_rl.reward.objectives,"
        " hackable_rl.reward.methods, hackable_rl.extensions, hackable_rl.reward.corruption,"
        " hackable_rl.reward.verifier; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --------------------------------------------------------------------------- channels (u, v given)

V1 = Verdict(1.0, 1.0, "7", "correct")
V0 = Verdict(0.0, 1.0, "8", "wrong")
VN = Verdict(None, 1.0, "7", "bad_reference")


def test_flip() -> None:
    assert Flip(0.3).apply(V1, 0.29, 0.5, RIGHT, EXAMPLE).reward == 0.0
    assert Flip(0.3).apply(V0, 0.29, 0.5, WRONG, EXAMPLE).reward == 1.0
    assert Flip(0.3).apply(V1, 0.31, 0.5, RIGHT, EXAMPLE) is V1
    assert Flip(1.0).apply(VN, 0.1, 0.5, RIGHT, EXAMPLE) is VN


def test_asymmetric() -> None:
    channel = Asymmetric(p_fp=0.5, p_fn=0.1)
    assert channel.apply(V0, 0.4, 0.5, WRONG, EXAMPLE).reward == 1.0
    assert channel.apply(V0, 0.6, 0.5, WRONG, EXAMPLE).reward == 0.0
    assert channel.apply(V1, 0.05, 0.5, RIGHT, EXAMPLE).reward == 0.0
    assert channel.apply(V1, 0.4, 0.5, RIGHT, EXAMPLE).reward == 1.0


def test_missing() -> None:
    assert Missing(0.2).apply(V1, 0.1, 0.5, RIGHT, EXAMPLE).reward is None
    assert Missing(0.2).apply(V1, 0.3, 0.5, RIGHT, EXAMPLE).reward == 1.0


def test_noise_is_a_clipped_gaussian_quantile() -> None:
    # u = 0.8413447 is the N(0, 1) quantile of +1: 0 + 0.25 * 1 = 0.25; from 1.0 it clips to 1.
    assert Noise(0.25).apply(V0, 0.8413447460685429, 0.5, WRONG, EXAMPLE).reward == pytest.approx(0.25)
    assert Noise(0.25).apply(V1, 0.8413447460685429, 0.5, RIGHT, EXAMPLE).reward == 1.0
    assert Noise(0.25).apply(VN, 0.9, 0.5, RIGHT, EXAMPLE).reward is None


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("n_steps >= 3", True),
        ("n_steps > 3", False),
        ("n_steps == 3", True),
        ("subject == Algebra", True),
        ("subject != 'Algebra'", False),
        ("level >= 4", False),
        ("missing_key == 1", False),
    ],
)
def test_selector(text: str, matches: bool) -> None:
    assert Selector.parse(text).matches(EXAMPLE.metadata) is matches


def test_selector_reads_numeric_levels() -> None:
    assert Selector.parse("level >= 4").matches({"level": 5})
    assert not Selector.parse("level >= 4").matches({"level": "3"})


def test_bad_selector_names_the_field() -> None:
    with pytest.raises(UserError, match="corruption.selector: 'n_steps three'"):
        Selector.parse("n_steps three")


def test_bias_applies_only_where_selected() -> None:
    channel = Bias(Selector.parse("n_steps >= 3"), p_fp=1.0, p_fn=0.0)
    assert channel.apply(V0, 0.5, 0.5, WRONG, EXAMPLE).reward == 1.0
    other = Example("q2", "7", {"n_steps": 1})
    assert channel.apply(V0, 0.5, 0.5, WRONG, other).reward == 0.0


def test_confidence_drop() -> None:
    dropped = ConfidenceDrop(0.5, floor=0.2).apply(V1, 0.1, 0.5, RIGHT, EXAMPLE)
    assert (dropped.reward, dropped.confidence) == (1.0, pytest.approx(0.6))
    assert ConfidenceDrop(0.5, floor=0.2).apply(V1, 0.7, 0.5, RIGHT, EXAMPLE).confidence == 1.0


def test_flaw_answers_as_the_flawed_checker() -> None:
    channel = Flaw(0.5, build_checker("any_box"), "any_box")
    hedge_clean = clean_checker(HEDGE, EXAMPLE)
    assert channel.apply(hedge_clean, 0.4, 0.5, HEDGE, EXAMPLE).reward == 1.0
    assert channel.apply(hedge_clean, 0.6, 0.5, HEDGE, EXAMPLE).reward == 0.0


def test_corrupt_wraps_a_checker_and_is_keyed() -> None:
    keyed = KeyedChannel(Flip(0.5), seed=3, member="m0")
    corrupted = corrupt(clean_checker, keyed)
    u, _ = corruption_uniforms(3, "m0", EXAMPLE.id, RIGHT)
    assert corrupted(RIGHT, EXAMPLE).reward == (0.0 if u < 0.5 else 1.0)
    assert corrupted(RIGHT, EXAMPLE) == corrupted(RIGHT, EXAMPLE)
    assert corruption_uniforms(3, "m0", "q1", RIGHT) != corruption_uniforms(3, "m1", "q1", RIGHT)
    assert corruption_uniforms(3, "m0", "q1", RIGHT) != corruption_uniforms(4, "m0", "q1", RIGHT)


def test_rate_drives_the_configured_channel() -> None:
    options = CheckerOptions()

    def channel(name: str, **kwargs):
        return build_channel(SimpleNamespace(channel=name, rate=0.4, kwargs=kwargs), options)

    assert channel("flip") == Flip(0.4)
    assert channel("asymmetric", fn_scale=0.5) == Asymmetric(0.4, 0.2)
    assert channel("asymmetric", fp_scale=5.0, fn_scale=0.5) == Asymmetric(1.0, 0.2)
    assert channel("missing") == Missing(0.4)
    assert channel("noise") == Noise(0.4)
    assert channel("bias", selector="level >= 4", fn_scale=0.5) == Bias(Selector("level", ">=", 4.0), 0.4, 0.2)
    assert channel("confidence") == ConfidenceDrop(0.4, 0.2)
    assert channel("flaw").p == 0.4 and channel("flaw").name == "any_box"
    assert channel("flaw", flaw="lenient_contains").name == "lenient_contains"
    assert channel("none") is None


def test_channel_settings_are_checked_by_the_channel() -> None:
    options = CheckerOptions()
    with pytest.raises(UserError, match=r"corruption.kwargs.fp_scal: unknown setting \(did you mean fp_scale\?"):
        build_channel(SimpleNamespace(channel="asymmetric", rate=0.4, kwargs={"fp_scal": 2.0}), options)
    with pytest.raises(UserError, match=r"corruption.kwargs.fp_scale: unknown setting \(this one takes none\)"):
        build_channel(SimpleNamespace(channel="flip", rate=0.4, kwargs={"fp_scale": 2.0}), options)
    with pytest.raises(UserError, match=r"corruption.kwargs.confidence_floor: 1.5 is not in \[0, 1\]"):
        build_channel(SimpleNamespace(channel="confidence", rate=0.4, kwargs={"confidence_floor": 1.5}), options)
    with pytest.raises(UserError, match="unknown corruption channel 'flipp' \\(did you mean 'flip'\\?\\)"):
        build_channel(SimpleNamespace(channel="flipp", rate=0.4, kwargs={}), options)


# --------------------------------------------------------------------------- aggregation / disagreement / shaping

R = np.array([[1.0, 0.0, 1.0, NAN], [0.0, 0.0, 1.0, 1.0], [NAN, NAN, NAN, NAN], [0.2, 0.4, NAN, NAN]])
C = np.array([[1.0, 0.5, 0.5, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])


def test_aggregate_hand_computed() -> None:
    np.testing.assert_allclose(aggregate(R, C, "mean"), [2 / 3, 0.5, NAN, 0.3])
    np.testing.assert_allclose(aggregate(R, C, "majority"), [1.0, 0.0, NAN, 0.0])  # a 2-2 tie is 0
    np.testing.assert_allclose(aggregate(R, C, "min"), [0.0, 0.0, NAN, 0.2])
    # (1*1 + 0.5*0 + 0.5*1) / 2 = 0.75; all-zero confidence -> missing.
    np.testing.assert_allclose(aggregate(R, C, "confidence_weighted"), [0.75, 0.5, NAN, NAN])
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(R, C, "median")


def test_disagreement_hand_computed() -> None:
    spread = disagreement(R, C)
    # Row 0: rewards 1,0,1 -> var 2/9 -> U 8/9; majority 1, one dissents -> 1/3; p = 2/3 -> H = 0.9183 bits;
    # confidences 1, .5, .5 -> std 0.2357. Row 1: 0,0,1,1 -> var 1/4 -> U 1; tie -> majority 0 -> 2/4 dissent; H 1.
    # Row 3: 0.2, 0.4 -> var 0.01 -> U 0.04; no vote >= 0.5 -> 0 dissent, H 0; confidences 0, 0 -> 0.
    np.testing.assert_allclose(spread.u, [8 / 9, 1.0, NAN, 0.04])
    np.testing.assert_allclose(spread.normalised, [1 / 3, 0.5, NAN, 0.0])
    np.testing.assert_allclose(spread.vote_entropy, [0.9182958340544896, 1.0, NAN, 0.0])
    np.testing.assert_allclose(spread.confidence_dispersion, [math.sqrt(1 / 18), 0.0, NAN, 0.0])
    np.testing.assert_allclose(spread.mean_confidence, [2 / 3, 1.0, NAN, 0.0])


def test_single_member_has_no_disagreement() -> None:
    spread = disagreement(np.array([[1.0]]), np.array([[0.7]]))
    assert (spread.u[0], spread.normalised[0], spread.vote_entropy[0], spread.confidence_dispersion[0]) == (
        0,
        0,
        0,
        0,
    )


def test_attenuation_modes() -> None:
    u = np.array([0.0, 0.5, 1.0])
    np.testing.assert_allclose(attenuation(u, "none"), [1, 1, 1])
    np.testing.assert_allclose(attenuation(u, "linear"), [1, 0.5, 0])
    np.testing.assert_allclose(attenuation(u, "exp", k=2.0), [1, math.exp(-1), math.exp(-2)])


def _robust(**fields):
    defaults = dict(
        confidence_weighting=True,
        disagreement_penalty=True,
        disagreement_lambda=0.5,
        conservative_aggregation=False,
        attenuation="linear",
        attenuation_k=1.0,
    )
    return SimpleNamespace(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # r = 0.75, U = 0.5, confidence 0.8, lambda 0.5.
        ({}, 0.5 * (0.75 * 0.8 - 0.25)),  # 0.175
        ({"confidence_weighting": False}, 0.5 * (0.75 - 0.25)),
        ({"disagreement_penalty": False}, 0.5 * 0.75 * 0.8),
        ({"attenuation": "none"}, 0.75 * 0.8 - 0.25),
        ({"attenuation": "exp", "attenuation_k": 2.0}, math.exp(-1.0) * (0.75 * 0.8 - 0.25)),
        ({"confidence_weighting": False, "disagreement_penalty": False, "attenuation": "none"}, 0.75),
    ],
)
def test_robust_reward_each_switch_alone(fields: dict, expected: float) -> None:
    shaped = robust_reward(np.array([0.75]), np.array([0.5]), np.array([0.8]), _robust(**fields))
    assert shaped[0] == pytest.approx(expected)


def test_shape_conservative_aggregation_uses_min() -> None:
    rewards, confidences = np.array([[1.0, 0.0, 1.0]]), np.ones((1, 3))
    spread = disagreement(rewards, confidences)
    plain = shape(
        rewards, confidences, spread, "mean", _robust(attenuation="none", disagreement_penalty=False)
    )
    conservative = shape(
        rewards,
        confidences,
        spread,
        "mean",
        _robust(attenuation="none", disagreement_penalty=False, conservative_aggregation=True),
    )
    assert plain.shaped[0] == pytest.approx(2 / 3) and conservative.shaped[0] == 0.0


# --------------------------------------------------------------------------- the pipeline


def _config(**sections):
    return validate_config(sections)


COMPLETIONS = [RIGHT, WRONG, HEDGE, "<think>x</think> \\boxed{7}"]
COLUMNS = dict(
    prompts=["a", "a", "b", "b"], ids=["q1", "q1", "q2", "q2"], references=["#### 7"] * 4, metadata=[{}] * 4
)


def test_pipeline_clean_baseline_is_format_plus_correctness() -> None:
    pipeline = build_reward_pipeline(_config(corruption={"channel": "none"}))
    batch = pipeline.score(COMPLETIONS, **COLUMNS)
    assert pipeline.reward_names() == ["format_tag_reward", "correctness_reward"]
    assert batch.rewards == [2.0, 1.0, 0.0, 2.0]
    assert [record.strict for record in batch.records] == [True, True, False, True]
    assert batch.counts["missing"] == 0.0 and batch.counts["mean_aggregate"] == pytest.approx(0.5)
    json.dumps([record.to_json() for record in batch.records])  # everything JSON-serialisable


def test_pipeline_records_every_member_and_measure() -> None:
    members = [
        {"name": "a"},
        {"name": "b", "corrupted": False},
        {"name": "c", "checker": "any_box", "corrupted": False},
    ]
    config = _config(
        method="robust", verifier={"members": members}, corruption={"channel": "flip", "rate": 1.0}
    )
    batch = build_reward_pipeline(config).score(COMPLETIONS, **COLUMNS)
    first = batch.records[0].to_json()
    # a: flipped 1 -> 0; b: 1; c: 1. mean 2/3, U 8/9, shaped (1/9) * (2/3 - 4/9) = 2/81.
    assert (first["member.a.clean_reward"], first["member.a.reward"], first["member.a.reason"]) == (
        1.0,
        0.0,
        "flipped:correct",
    )
    assert first["reward"] == pytest.approx(2 / 3)
    assert first["U"] == pytest.approx(8 / 9)
    assert first["shaped"] == pytest.approx(2 / 81) == first["optimised_reward"] == first["correctness_reward"]
    assert first["final_reward"] == pytest.approx(1 + 2 / 81)
    assert first["down_weighted"] and not first["suppressed"]
    hedge = batch.records[2].to_json()
    # a: 0 -> 1, b: 0, c (any_box): 1. Same numbers; not strict so format 0.
    assert hedge["format_tag_reward"] == 0.0 and hedge["reward"] == pytest.approx(2 / 3)
    for key in (
        "normalised_disagreement",
        "vote_entropy",
        "confidence_dispersion",
        "mean_confidence",
        "robust_aggregate",
    ):
        assert key in first
    assert batch.counts["member.a.corrupted"] == 4.0 and batch.counts["member.b.corrupted"] == 0.0


def test_pipeline_verify_is_the_verifier_part_of_score() -> None:
    members = [{"name": "a"}, {"name": "b"}, {"name": "c", "checker": "any_box", "corrupted": False}]
    pipeline = build_reward_pipeline(
        _config(method="robust", verifier={"members": members}, corruption={"channel": "flip", "rate": 0.5})
    )
    examples = [Example(i, r, m) for i, r, m in zip(COLUMNS["ids"], COLUMNS["references"], COLUMNS["metadata"], strict=True)]
    verified = pipeline.verify(COMPLETIONS, examples)
    records = [record.to_json() for record in pipeline.score(COMPLETIONS, **COLUMNS).records]
    ensemble = verified.ensemble
    assert len(ensemble.seen) == 3 and all(len(column) == len(COMPLETIONS) for column in ensemble.seen)
    assert ensemble.rewards.shape == (len(COMPLETIONS), 3)
    shaped = shape(ensemble.rewards, ensemble.confidences, ensemble.spread, "mean", pipeline.method_settings).shaped
    arrays = {"reward": ensemble.aggregate, "U": ensemble.spread.u, "shaped": shaped, "optimised_reward": verified.optimised}
    for key, values in arrays.items():
        assert values.tolist() == pytest.approx([record[key] for record in records])


def test_pipeline_missing_is_imputed_for_optimisation_only() -> None:
    config = _config(corruption={"channel": "missing", "rate": 1.0}, trainer={"missing_reward_value": -0.5})
    batch = build_reward_pipeline(config).score(COMPLETIONS, **COLUMNS)
    assert all(record.missing and record.reward is None for record in batch.records)
    assert [record.components["correctness_reward"] for record in batch.records] == [-0.5] * 4
    assert batch.rewards == [0.5, 0.5, -0.5, 0.5]
    assert batch.counts["missing"] == 4.0 and "mean_aggregate" not in batch.counts


def test_pipeline_baseline_vs_robust_choose_the_optimised_reward() -> None:
    members = [{"name": "a"}, {"name": "b", "corrupted": False}]
    common = dict(verifier={"members": members}, corruption={"channel": "flip", "rate": 1.0})
    baseline = build_reward_pipeline(_config(method="baseline", **common)).score(COMPLETIONS, **COLUMNS)
    robust = build_reward_pipeline(_config(method="robust", **common)).score(COMPLETIONS, **COLUMNS)
    # a and b always disagree: aggregate 0.5, U 1 -> linear attenuation 0 -> shaped 0 (suppressed).
    assert baseline.records[0].optimised_reward == 0.5 and not baseline.records[0].suppressed
    assert robust.records[0].optimised_reward == 0.0 and robust.records[0].suppressed
    assert robust.counts["suppressed"] == 4.0


def test_pipeline_weighted_objective_with_gate_and_length() -> None:
    config = _config(
        corruption={"channel": "none"},
        objective={
            "mode": "weighted_length_penalty",
            "length_penalty_lambda": 1.0,
            "strict_format_gate": True,
        },
    )
    completions = ["<think>a b</think> \\boxed{7}", "<think>a b c d e f</think> \\boxed{7}", HEDGE, WRONG]
    batch = build_reward_pipeline(config).score(completions, **COLUMNS)
    # group a: lengths 2, 6 (mean 4): r_l 0.75, 0.25 -> 1 + 0.75 + 1, 1 + 0.25 + 1. group b: hedge gated -1;
    # WRONG alone strict (length 1, hedge 0 -> mean 0.5): r_c 0 -> 0 + 0 + 1.
    assert batch.rewards == pytest.approx([2.75, 2.25, -1.0, 1.0])


def test_pipeline_flaw_channel_rewards_hedging() -> None:
    config = _config(corruption={"channel": "flaw", "kwargs": {"flaw": "any_box"}, "rate": 1.0})
    hedge = build_reward_pipeline(config).score(COMPLETIONS, **COLUMNS).records[2].to_json()
    assert hedge["member.m0.clean_reward"] == 0.0 and hedge["member.m0.reward"] == 1.0


def test_pipeline_checks_column_lengths() -> None:
    with pytest.raises(ValueError, match="ids"):
        build_reward_pipeline(_config()).score(COMPLETIONS, **{**COLUMNS, "ids": ["q1"]})
