"""Literal-string tests for every reward of spec section 3, with TRL's calling convention."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import hackable_rl.reward.functions  # noqa: F401  (registers the rewards)
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import REWARDS, build_reward
from hackable_rl.reward.functions import (
    correctness_reward,
    format_tag_reward,
    group_slices,
    length_penalty_reward,
    thinking_lengths,
    token_utilisation_reward,
)

PLUGINS = Path(__file__).parent / "plugins"
TRL_EXTRAS = {
    "prompts": ["p"] * 6,
    "completion_ids": [[1, 2]] * 6,
    "trainer_state": object(),
    "log_extra": lambda column, values: None,
    "log_metric": lambda name, value: None,
}
MALFORMED = [
    "<think>3+4=7</think> \\boxed{7}",  # strict, right
    "<think>3+4=7</think> the answer is 7",  # no box
    "<think>a</think><think>b</think> \\boxed{7}",  # two think blocks
    "<think>3+4</think> \\boxed{}",  # empty box
    "<think>3+4</think> \\boxed{7",  # unbalanced braces
    "<think>3+4</think> \\boxed{7} \\boxed{8}",  # hedge
]


def test_every_reward_is_registered() -> None:
    for name in (
        "format_tag_reward",
        "correctness_reward",
        "length_penalty_reward",
        "token_utilisation_reward",
    ):
        assert name in REWARDS


def test_format_tag_reward_on_malformed_completions() -> None:
    assert format_tag_reward(MALFORMED, **TRL_EXTRAS) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_format_tag_reward_with_configured_tags() -> None:
    reward = build_reward("format_tag_reward", open_tag="<r>", close_tag="</r>")
    assert reward(["<r>x</r> \\boxed{1}", "<think>x</think> \\boxed{1}"]) == [1.0, 0.0]


def test_format_tag_reward_on_conversational_completions() -> None:
    messages = [[{"role": "assistant", "content": "<think>x</think> \\boxed{1}"}]]
    assert format_tag_reward(messages) == [1.0]


def test_correctness_reward_on_malformed_completions() -> None:
    assert correctness_reward(MALFORMED, reference=["#### 7"] * 6, **TRL_EXTRAS) == [
        1.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]


def test_correctness_reward_reference_forms() -> None:
    completions = [
        "<think>t</think> \\boxed{0.75}",
        "<think>t</think> \\boxed{72}",
        "<think>t</think> \\boxed{1,000}",
    ]
    references = ["The answer is $\\boxed{\\frac{3}{4}}$.", "so #### 72", "1000"]
    assert correctness_reward(completions, reference=references) == [1.0, 1.0, 1.0]
    assert correctness_reward(["<think>t</think> \\boxed{71}"], reference=["#### 72"]) == [0.0]


def test_correctness_reward_unparseable_reference_is_none_not_correct() -> None:
    assert correctness_reward(["<think>t</think> \\boxed{7}"], reference=["#### "]) == [None]


def test_correctness_reward_column_length_is_checked() -> None:
    with pytest.raises(ValueError, match="reference"):
        correctness_reward(["a", "b"], reference=["1"])


def test_thinking_lengths_words_and_tokenizer() -> None:
    completions = ["<think>one two three</think> \\boxed{1}", "no format", "<think> a  b </think> \\boxed{2}"]
    assert thinking_lengths(completions) == [3, 0, 2]
    assert thinking_lengths(completions, tokenizer=lambda text: list(text.replace(" ", ""))) == [11, 0, 2]

    class FakeHFTokenizer:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            assert add_special_tokens is False
            return [0] * len(text)

    assert thinking_lengths(completions, tokenizer=FakeHFTokenizer()) == [13, 0, 4]


def _thought(words: int) -> str:
    return "<think>" + " ".join(["w"] * words) + "</think> \\boxed{1}"


def test_length_penalty_hand_computed() -> None:
    # Group lengths 2, 4, 6, 8: mean 5 -> 1 - L/10 = 0.8, 0.6, 0.4, 0.2.
    completions = [_thought(2), _thought(4), _thought(6), _thought(8)]
    assert length_penalty_reward(completions, group_size=4) == pytest.approx([0.8, 0.6, 0.4, 0.2])


def test_length_penalty_spec_landmarks_and_clip() -> None:
    # Lengths 10, 5, 20, 5: mean 10 -> mean length 0.5, half 0.75, double 0 (clipped), half 0.75.
    completions = [_thought(10), _thought(5), _thought(20), _thought(5)]
    assert length_penalty_reward(completions, group_size=4) == pytest.approx([0.5, 0.75, 0.0, 0.75])


def test_length_penalty_non_strict_scores_zero_and_counts_as_zero_length() -> None:
    # Lengths 4, 0 (not strict), mean 2: the strict one scores clip(1 - 4/4) = 0, the other 0.
    assert length_penalty_reward([_thought(4), "garbage"], group_size=2) == [0.0, 0.0]
    # Lengths 2, 0, 4 -> mean 2: 1 - 2/4 = 0.5, 0, clip(1 - 4/4) = 0.
    assert length_penalty_reward([_thought(2), "x", _thought(4)], group_size=3) == pytest.approx(
        [0.5, 0.0, 0.0]
    )


def test_length_penalty_zero_mean_scores_zero() -> None:
    assert length_penalty_reward([_thought(0), "nope"], group_size=2) == [0.0, 0.0]


def test_length_penalty_groups_by_runs_of_identical_prompts() -> None:
    completions = [_thought(2), _thought(6), _thought(3), _thought(3), _thought(9)]
    prompts = ["a", "a", "b", "b", "c"]
    # a: mean 4 -> 0.75, 0.25; b: mean 3 -> 0.5, 0.5; c alone: mean 9 -> 0.5.
    assert length_penalty_reward(completions, prompts=prompts) == pytest.approx([0.75, 0.25, 0.5, 0.5, 0.5])


def test_group_slices() -> None:
    assert group_slices(5, group_size=2) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert group_slices(4, prompts=["a", "a", "b", "a"]) == [slice(0, 2), slice(2, 3), slice(3, 4)]
    with pytest.raises(ValueError, match="group_size"):
        group_slices(3)


@pytest.fixture
def zero_shot(tmp_path: Path) -> Path:
    path = tmp_path / "zero_shot.jsonl"
    rows = [
        {"id": "easy", "correct": True, "thinking_length": 4},
        {"id": "hard", "correct": 0, "thinking_length": 9},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_token_utilisation_hand_computed(zero_shot: Path) -> None:
    completions = [
        _thought(4),
        _thought(6),
        _thought(12),
        _thought(3),
        "<think>t</think> \\boxed{2}",
        _thought(3),
    ]
    ids = ["easy", "easy", "easy", "hard", "hard", "unknown"]
    metrics: list[tuple[str, float]] = []
    scores = token_utilisation_reward(
        completions,
        id=ids,
        reference=["1", "1", "1", "1", "1", "1"],
        zero_shot_path=str(zero_shot),
        w_easy=0.5,
        w_hard=2.0,
        log_metric=lambda name, value: metrics.append((name, value)),
        prompts=["p"] * 6,
    )
    # easy (l=4): 4 -> 0; 6 -> -0.5*clip(0.5) = -0.25; 12 -> -0.5*clip(2) = -0.5.
    # hard: right -> 2.0 * 1; wrong -> 0. unknown: 0 and counted.
    assert scores == pytest.approx([0.0, -0.25, -0.5, 2.0, 0.0, 0.0])
    assert metrics == [("token_utilisation/missing", 1.0)]


def test_token_utilisation_uses_given_correctness(zero_shot: Path) -> None:
    scores = token_utilisation_reward(
        [_thought(3)], id=["hard"], zero_shot_path=str(zero_shot), correctness=[0.4]
    )
    assert scores == pytest.approx([0.4])


def test_token_utilisation_needs_its_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="zero_shot_path"):
        token_utilisation_reward([_thought(1)], id=["a"], reference=["1"])
    with pytest.raises(UserError, match="not found"):
        token_utilisation_reward(
            [_thought(1)], id=["a"], reference=["1"], zero_shot_path=str(tmp_path / "none.jsonl")
        )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(UserError, match="bad.jsonl:1: missing correct, thinking_length"):
        token_utilisation_reward([_thought(1)], id=["a"], reference=["1"], zero_shot_path=str(bad))


def test_external_reward_loads_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    reward = build_reward("my_plugin:shouting_reward")
    assert reward(["LOUD", "quiet"], prompts=["p", "p"]) == [1.0, 0.0]
    assert "my_plugin" in sys.modules
