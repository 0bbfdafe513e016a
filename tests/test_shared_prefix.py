"""Shared prefixes run once (models.shared_prefix): the split on constructed rows, the same hidden
states, gradients and sampled tokens as the full forward, and every other call untouched."""

from __future__ import annotations

import copy

import torch

from hackable_rl.models.shared_prefix import best_split, share_prefixes


def test_rows_sharing_a_prompt_split_at_its_end():
    # two prompts (left-padded to 5 tokens) with three completions each, rows shuffled
    prompt_a, prompt_b = [0, 0, 7, 8, 9], [4, 5, 6, 8, 9]
    rows = [prompt_a + [1, 2, 3], prompt_b + [1, 1, 1], prompt_a + [2, 2, 2], prompt_b + [3, 1, 2],
            prompt_a + [3, 3, 3], prompt_b + [2, 3, 1]]
    ids = torch.tensor(rows)
    mask = (ids != 0).int()
    split = best_split(ids, mask)
    assert split.length == 5 and split.sources.tolist() == [0, 1]
    assert split.owner.tolist() == [0, 1, 0, 1, 0, 1]
    assert split.passes(8) == 2 * 5 + 6 * 3


def test_rows_with_nothing_to_share_are_left_alone():
    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8], [9, 1, 2, 3]])
    assert best_split(ids, torch.ones_like(ids)) is None


def _group_batch(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts x 3 completions, left-padded prompts and right-padded completions, rows interleaved
    as TRL's shuffled loss batch has them."""
    prompts = ["Problem: Ann has 5 pens. Ann buys 7 more.\nAnswer: ", "Problem: Ann has 11 pens.\nAnswer: "]
    completions = ["<think>5+7=12</think> \\boxed{12}", "<think>5+7=13</think>", "\\boxed{12}"]
    pad = tokenizer.pad_token_id
    encoded = [(tokenizer(p, add_special_tokens=False)["input_ids"], tokenizer(c, add_special_tokens=False)["input_ids"])
               for c in completions for p in prompts]
    width_p = max(len(p) for p, _ in encoded)
    width_c = max(len(c) for _, c in encoded)
    ids = [[pad] * (width_p - len(p)) + p + c + [pad] * (width_c - len(c)) for p, c in encoded]
    mask = [[0] * (width_p - len(p)) + [1] * (len(p) + len(c)) + [0] * (width_c - len(c)) for p, c in encoded]
    return torch.tensor(ids), torch.tensor(mask)


def test_the_loss_forward_and_its_gradients_match_the_full_forward(tiny, tokenizer):
    ids, mask = _group_batch(tokenizer)
    full, shared = copy.deepcopy(tiny).train(), copy.deepcopy(tiny).train()
    share_prefixes(shared.model)
    outputs = []
    for model in (full, shared):
        logits = model(input_ids=ids, attention_mask=mask).logits  # [B, T, V]
        loss = (logits.log_softmax(-1) * mask[..., None]).sum()
        loss.backward()
        outputs.append((logits.detach(), [parameter.grad for parameter in model.parameters()]))
    (full_logits, full_grads), (shared_logits, shared_grads) = outputs
    valid = mask.bool()
    assert torch.allclose(full_logits[valid], shared_logits[valid], atol=1e-5)
    for full_grad, shared_grad in zip(full_grads, shared_grads, strict=True):
        # a float32 sum in another order: the tolerance scales with the tensor's largest entry (the
        # tied embedding's gradient reaches ~100, so an entry near 0 may differ by ~3e-5)
        scale = full_grad.abs().max().item()
        assert torch.allclose(full_grad, shared_grad, atol=1e-6 * scale, rtol=1e-4)


def test_sampling_from_shared_prefills_gives_the_same_tokens(tiny, tokenizer):
    prompts = ["Problem: Ann has 5 pens. Ann buys 7 more.\nAnswer: "] * 4 + ["Problem: Ann has 11 pens.\nAnswer: "] * 4
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    full, shared = copy.deepcopy(tiny).eval(), copy.deepcopy(tiny).eval()
    share_prefixes(shared.model)
    generated = []
    for model in (full, shared):
        torch.manual_seed(3)
        with torch.no_grad():
            generated.append(model.generate(**encoded, max_new_tokens=12, do_sample=True, top_k=0,
                                            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    assert torch.equal(generated[0], generated[1])


def test_decoding_steps_and_unshareable_batches_go_through_unchanged(tiny, tokenizer):
    shared = copy.deepcopy(tiny).eval()
    calls = []
    original = shared.model.forward

    def counting(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return original(*args, **kwargs)

    shared.model.forward = counting
    share_prefixes(shared.model)
    distinct = tokenizer(["Ann has 5 pens.", "Bo buys 7 more."], return_tensors="pt", padding=True,
                         add_special_tokens=False)
    with torch.no_grad():
        shared(**distinct)
    assert calls == [distinct["input_ids"].shape]  # one call, in full
