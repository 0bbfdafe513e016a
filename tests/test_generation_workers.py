"""Batches decoded side by side (`generate_completions(workers=...)`, `evaluation.workers`): the same
completions, in the same order, as one batch after another; each thread draws its batch's own stream."""

from __future__ import annotations

import copy
import logging

import pytest
import torch

from hackable_rl.models.decoding import decodes_rows_apart, drawing_from, dropping_finished_rows
from hackable_rl.models.generation import GenerationSettings, generate_completions

PROMPTS = [f"Problem: Ann has {n} pens. Ann buys {n + 3} more.\nAnswer: " for n in range(2, 12)]  # 10: 3 batches of 4


@pytest.fixture
def decoder(small_policy):
    model = copy.deepcopy(small_policy)
    dropping_finished_rows(model)
    return model


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _texts(model, tokenizer, settings, workers: int) -> list[tuple[str, int]]:
    generated = generate_completions(model, tokenizer, PROMPTS, settings, batch_size=4, seed=7, workers=workers)
    return [(g.text, g.n_tokens) for g in generated]


@pytest.mark.parametrize("settings", [GenerationSettings(max_new_tokens=16, temperature=1.0),
                                      GenerationSettings(max_new_tokens=16, temperature=0.7, top_p=0.9, top_k=20),
                                      GenerationSettings.greedy(16)])
def test_side_by_side_gives_one_after_anothers_completions(decoder, small_tokenizer, two_threads, settings):
    alone = _texts(decoder, small_tokenizer, settings, workers=1)
    assert len(alone) == len(PROMPTS)
    assert len(set(alone)) > 1 or not settings.do_sample  # samples differ (this random policy's greedy text does not)
    assert _texts(decoder, small_tokenizer, settings, workers=2) == alone
    assert torch.get_num_threads() == 2  # the workers' share of threads is given back


def test_a_threads_generator_draws_what_the_global_seed_would(decoder, small_tokenizer):
    encoded = small_tokenizer(PROMPTS[:4], return_tensors="pt", padding=True, add_special_tokens=False)
    kwargs = dict(max_new_tokens=12, do_sample=True, top_k=0, pad_token_id=small_tokenizer.pad_token_id,
                  eos_token_id=small_tokenizer.eos_token_id)
    torch.manual_seed(11)
    global_stream = decoder.generate(**encoded, **kwargs)
    torch.manual_seed(99)  # the global stream is elsewhere: only the thread's generator can give the same draws
    with drawing_from(torch.Generator().manual_seed(11)):
        own_stream = decoder.generate(**encoded, **kwargs)
    assert torch.equal(global_stream, own_stream)


def test_without_the_row_dropping_decoder_the_batches_run_one_after_another(small_policy, small_tokenizer, caplog):
    settings = GenerationSettings(max_new_tokens=8)
    assert not decodes_rows_apart(small_policy)
    alone = _texts(small_policy, small_tokenizer, settings, workers=1)
    with caplog.at_level(logging.WARNING):
        assert _texts(small_policy, small_tokenizer, settings, workers=2) == alone
    assert "one after another" in caplog.text


@pytest.mark.parametrize(("settings", "named"), [
    ({"torch_threads": 2, "generation": {"drop_finished_rows": False}}, "drop_finished_rows"),
    ({"torch_threads": 2, "generation": {"drop_finished_rows": True, "stop": ["END"]}}, "generation.stop"),
    ({"torch_threads": 1, "generation": {"drop_finished_rows": True}}, "exceeds torch_threads = 1"),
])
def test_workers_the_decoder_or_the_threads_cannot_serve_are_refused(settings, named):
    from pydantic import ValidationError

    from hackable_rl.config.experiment import ExperimentConfig

    with pytest.raises(ValidationError, match=named):
        ExperimentConfig.model_validate({**settings, "evaluation": {"workers": 2}})
    fine = {"torch_threads": 2, "generation": {"drop_finished_rows": True}, "evaluation": {"workers": 2}}
    assert ExperimentConfig.model_validate(fine).evaluation.workers == 2
