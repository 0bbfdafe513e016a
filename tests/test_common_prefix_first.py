"""A batch's common prompt tokens first (`evaluation.common_prefix_first`): the padding after them,
the nested prefix split that runs them once per batch, and the same completions as left padding."""

from __future__ import annotations

import copy

import pytest
import torch

from hackable_rl.models.decoding import dropping_finished_rows
from hackable_rl.models.generation import GenerationSettings, _encode, generate_completions
from hackable_rl.models.loading import policy_backbone
from hackable_rl.models.shared_prefix import best_chain, share_prefixes

INSTRUCTION = "Solve the problem. Think first, then give the answer.\nProblem: "
PROMPTS = [f"{INSTRUCTION}Ann has {n} pens. Ann buys {n * 7 % 13} more pens today.\nAnswer: " for n in range(2, 8)]


def test_the_padding_goes_after_the_tokens_every_prompt_shares(small_tokenizer):
    prompts = ["Problem: Ann has 5 pens.\nAnswer: ", "Problem: Bo has 12 red pens.\nAnswer: "]
    ids = [small_tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    shared = next(i for i, (a, b) in enumerate(zip(*ids, strict=False)) if a != b)
    encoded = _encode(small_tokenizer, prompts, common_first=True)
    width = max(map(len, ids))
    assert encoded["input_ids"].shape == (2, width)
    for row, (tokens, mask) in enumerate(zip(encoded["input_ids"].tolist(), encoded["attention_mask"].tolist(),
                                             strict=True)):
        assert [t for t, m in zip(tokens, mask, strict=True) if m] == ids[row]  # its own tokens, in order
        assert mask[:shared] == [1] * shared and mask[-1] == 1  # the shared tokens lead, its last token ends it
    left = _encode(small_tokenizer, prompts, common_first=False)
    assert left["attention_mask"][:, -1].tolist() == [1, 1] and left["attention_mask"].sum() == encoded["attention_mask"].sum()


def test_a_row_that_is_all_shared_keeps_its_last_token_after_the_padding(small_tokenizer):
    prompts = ["Problem: Ann", "Problem: Ann has 5 pens."]
    encoded = _encode(small_tokenizer, prompts, common_first=True)
    assert encoded["attention_mask"][:, -1].tolist() == [1, 1]
    short = small_tokenizer(prompts[0], add_special_tokens=False)["input_ids"]
    assert encoded["input_ids"][0, -1].item() == short[-1]


def test_the_nested_split_runs_the_common_tokens_once_then_each_prompt_once():
    # 3 prompts x 2 samples: 4 tokens common to all, then 3 tokens of each prompt, then nothing per row
    common, own = [5, 6, 7, 8], [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    ids = torch.tensor([common + rest for rest in own for _ in range(2)])
    one, = best_chain(ids, torch.ones_like(ids), max_levels=1)
    assert (one.length, len(one.sources)) == (7, 3)  # one level: every prompt in full
    chain = best_chain(ids, torch.ones_like(ids), max_levels=2)
    assert [(split.length, len(split.sources)) for split in chain] == [(4, 1), (7, 3)]
    assert chain[1].owner.tolist() == [0, 0, 1, 1, 2, 2]


def test_a_level_that_saves_too_little_is_not_added():
    # 4 rows of 12 sharing one token, then two pairs sharing 10: the common token's own level would
    # save 1 pass of 48, less than LEVEL_SAVED_SHARE's 2
    pairs = [[4, 5, 6, 7, 8, 9, 1, 2, 3], [9, 8, 7, 6, 5, 4, 3, 2, 1]]
    ids = torch.tensor([[1] + pairs[row // 2] + [row, row] for row in range(4)])
    chain = best_chain(ids, torch.ones_like(ids), max_levels=3)
    assert [(split.length, len(split.sources)) for split in chain] == [(10, 2)]


@pytest.fixture
def decoders(small_policy):
    left = copy.deepcopy(small_policy)
    nested = copy.deepcopy(small_policy)
    share_prefixes(policy_backbone(left))
    share_prefixes(policy_backbone(nested), max_levels=2)
    for model in (left, nested):
        dropping_finished_rows(model)
    return left, nested


@pytest.mark.parametrize("settings", [GenerationSettings(max_new_tokens=16, temperature=1.0),
                                      GenerationSettings.greedy(16)])
def test_common_tokens_first_gives_left_paddings_completions(decoders, small_tokenizer, settings):
    from dataclasses import replace

    left, nested = decoders
    prompts = [prompt for prompt in PROMPTS for _ in range(3)]  # three samples of each prompt
    plain = generate_completions(left, small_tokenizer, prompts, settings, batch_size=9, seed=5)
    first = generate_completions(nested, small_tokenizer, prompts, replace(settings, common_prefix_first=True),
                                 batch_size=9, seed=5)
    assert [(g.text, g.n_tokens) for g in first] == [(g.text, g.n_tokens) for g in plain]
    assert len({g.text for g in plain}) > 1 or not settings.do_sample


def test_common_prefix_first_without_the_row_dropping_decoder_is_refused():
    from pydantic import ValidationError

    from hackable_rl.config.experiment import ExperimentConfig

    with pytest.raises(ValidationError, match="common_prefix_first"):
        ExperimentConfig.model_validate({"generation": {"drop_finished_rows": False},
                                         "evaluation": {"common_prefix_first": True}})
