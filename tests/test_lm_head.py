"""The real-model speed settings: the loss's LM head on completion tokens only, and LoRA on the top
blocks only. Both on a tiny Llama-style model, in seconds."""

from __future__ import annotations

import copy

import pytest
import torch

from hackable_rl.training.trainer import completion_only_head

SMALL_LAYERS = 4


def _scored_batch(small_tokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompt + completion rows, the labels TRL scores (completion tokens only) and the mask."""
    prompt = small_tokenizer("Problem: Ann has 5 pens. Ann buys 7 more.", add_special_tokens=False)["input_ids"]
    completions = [small_tokenizer(text, add_special_tokens=False)["input_ids"]
                   for text in ("<think>5+7=12</think> \\boxed{12}", "\\boxed{13}")]
    width = max(len(c) for c in completions)
    ids = torch.tensor([prompt + c + [small_tokenizer.pad_token_id] * (width - len(c)) for c in completions])
    mask = torch.tensor([[1] * (len(prompt) + len(c)) + [0] * (width - len(c)) for c in completions])
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, : len(prompt)] = -100
    return ids, mask, labels


def test_the_head_on_completion_tokens_gives_the_log_probs_and_gradients_of_every_position(small_policy, small_tokenizer):
    from trl.trainer.utils import add_fused_lm_head

    ids, mask, labels = _scored_batch(small_tokenizer)
    results = []
    for compact in (False, True):
        model = copy.deepcopy(small_policy).train()
        add_fused_lm_head(model)
        with completion_only_head(compact):
            output = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        output.loss.backward()
        results.append((output.log_probs.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (every, every_grads), (compact, compact_grads) = results
    assert torch.allclose(every, compact, atol=1e-6)
    assert (compact[labels[:, 1:] == -100] == 0).all()  # unscored positions carry 0, as on TRL's own paths
    for full_grad, compact_grad in zip(every_grads, compact_grads, strict=True):
        assert torch.allclose(full_grad, compact_grad, atol=1e-6 * max(full_grad.abs().max().item(), 1.0))


def test_the_compact_head_is_taken_only_while_asked_for():
    import trl.trainer.utils as trl_utils

    cpu = torch.device("cpu")
    assert not trl_utils._use_triton(cpu)
    with completion_only_head():
        assert trl_utils._use_triton(cpu)
    assert not trl_utils._use_triton(cpu)


def test_lora_on_the_top_blocks_adapts_only_those_and_stops_the_backward_there(small_policy, small_tokenizer):
    from peft import get_peft_model

    from hackable_rl.config.experiment import LoraConfig
    from hackable_rl.training.trl_args import build_peft_config

    class Config:  # build_peft_config reads only the lora section
        lora = LoraConfig(enabled=True, r=2, top_layers=2)

    model = get_peft_model(copy.deepcopy(small_policy), build_peft_config(Config(), small_policy))
    adapted = sorted({int(name.split("layers.")[1].split(".")[0]) for name, _ in model.named_parameters() if "lora_" in name})
    assert adapted == [2, 3]
    ids, mask, _ = _scored_batch(small_tokenizer)
    reached = []
    model.base_model.model.model.layers[1].register_forward_hook(lambda _m, _i, out: reached.append(out[0].requires_grad
                                                                                                    if isinstance(out, tuple) else out.requires_grad))
    model(input_ids=ids, attention_mask=mask).logits.sum().backward()
    assert reached == [False]  # below the lowest adapter nothing needs a gradient


def test_top_layers_beyond_the_policy_are_one_clear_error(small_policy):
    from hackable_rl.config.experiment import LoraConfig
    from hackable_rl.core.errors import UserError
    from hackable_rl.training.trainer import check_lora_targets

    class Config:
        lora = LoraConfig(enabled=True, top_layers=9)

    with pytest.raises(UserError, match="lora.top_layers: 9 is more than the policy's 4 blocks"):
        check_lora_targets(Config(), small_policy)
