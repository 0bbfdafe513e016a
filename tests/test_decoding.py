"""Decoding that drops finished rows (models.decoding) against transformers' `generate`, on a tiny
model in seconds: the same tokens while every row is writing, for sampling and greedy decoding."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GenerationConfig

from hackable_rl.models.decoding import covers, decode, dropping_finished_rows

SMALL_LAYERS = 2


def _batch(small_tokenizer):
    prompts = ["Problem: Ann has 5 pens. Ann buys 7 more.\nAnswer: "] * 3 + ["Problem: Ann has 11 pens.\nAnswer: "] * 3
    return small_tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)


def _config(small_tokenizer, eos: int, **settings) -> GenerationConfig:
    return GenerationConfig(max_new_tokens=12, pad_token_id=small_tokenizer.pad_token_id, eos_token_id=eos, **settings)


@pytest.mark.parametrize("settings", [dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0),
                                      dict(do_sample=True, temperature=0.7, top_p=0.9, top_k=20),
                                      dict(do_sample=False)])
def test_while_every_row_writes_the_tokens_are_generates(small_policy, small_tokenizer, settings):
    encoded = _batch(small_tokenizer)
    config = _config(small_tokenizer, eos=small_tokenizer.vocab_size + 10, **settings)  # an eos no row can write: none finishes
    outputs = []
    for run in (lambda: small_policy.generate(**encoded, generation_config=config), lambda: decode(small_policy, **encoded, config=config)):
        torch.manual_seed(3)
        outputs.append(run())
    assert torch.equal(outputs[0], outputs[1])


def test_finished_rows_end_in_eos_then_padding_and_greedy_tokens_match(small_policy, small_tokenizer):
    encoded = _batch(small_tokenizer)
    with torch.no_grad():
        first = small_policy.generate(**encoded, max_new_tokens=1, do_sample=False, pad_token_id=small_tokenizer.pad_token_id)
    eos = int(first[0, -1])  # the first row's first greedy token: that row finishes at once
    config = _config(small_tokenizer, eos=eos, do_sample=False)
    with torch.no_grad():
        expected = small_policy.generate(**encoded, generation_config=config)
    got = decode(small_policy, **encoded, config=config)
    assert got.shape == expected.shape and torch.equal(got, expected)
    prompt = encoded["input_ids"].shape[1]
    assert got[0, prompt] == eos and (got[0, prompt + 1:] == small_tokenizer.pad_token_id).all()


def test_installed_as_generate_it_takes_the_calls_it_covers_and_passes_the_rest_on(small_policy, small_tokenizer):
    model = copy.deepcopy(small_policy)
    dropping_finished_rows(model)
    encoded = _batch(small_tokenizer)
    config = _config(small_tokenizer, eos=small_tokenizer.vocab_size + 10, do_sample=True, top_k=0)
    torch.manual_seed(5)
    ours = model.generate(**encoded, generation_config=config)
    torch.manual_seed(5)
    assert torch.equal(ours, small_policy.generate(**encoded, generation_config=config))
    assert not covers(_config(small_tokenizer, eos=1, do_sample=True, repetition_penalty=1.3))
    penalised = _config(small_tokenizer, eos=1, do_sample=False, repetition_penalty=1.3)
    assert torch.equal(model.generate(**encoded, generation_config=penalised), small_policy.generate(**encoded, generation_config=penalised))


@pytest.mark.parametrize(("flags", "warns"), [({"avx512_bf16": "no", "amx_bf16": "no"}, True),
                                              ({"avx512_bf16": "yes", "amx_bf16": "no"}, False)])
def test_bfloat16_on_a_cpu_without_bf16_products_is_named_slower(monkeypatch, caplog, flags, warns):
    from hackable_rl.core import numerics
    from hackable_rl.models.decoding import decoding_dtype

    monkeypatch.setattr(numerics, "cpu_has_flag", flags.get)
    with caplog.at_level("WARNING"):
        assert decoding_dtype("bfloat16", "cpu") is torch.bfloat16
    assert ("slower than float32" in caplog.text) is warns
    assert decoding_dtype("float32", "cpu") is torch.float32


def test_a_bfloat16_policy_decodes_with_the_same_row_bookkeeping(small_policy, small_tokenizer):
    encoded = _batch(small_tokenizer)
    config = _config(small_tokenizer, eos=small_tokenizer.vocab_size + 10, do_sample=False)
    policy = copy.deepcopy(small_policy).to(dtype=torch.bfloat16)
    plain, ours = policy.generate(**encoded, generation_config=config), decode(policy, **encoded, config=config)
    assert torch.equal(plain, ours)  # greedy, no row finishes: the same bf16 forward calls, the same tokens
