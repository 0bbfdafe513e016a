"""Policy models: the tiny model and its tokenizer, pretrained loading, attention backends,
batched generation, and the record of a pretrained source (reference.json).

- `tokenizer.py`: `train_tokenizer` (byte-level BPE, digits one per token), `load_tokenizer`
- `tiny.py`: `build_tiny_model` (Qwen2 or Llama from config, tied embeddings)
- `loading.py`: `policy_dir`, `load_policy` (tiny, SmolLM2 GGUF, local folder, hub id, PEFT adapter),
  `format_prompt`
- `backend.py`: `choose_attention` (FlashAttention-2 / SDPA), Liger kernels
- `generation.py`: `GenerationSettings`, `generate_completions`, `generate_decodings` (batches side by side)
- `reference.py`: `pretrained_reference`, `save_reference` (source, pins, weight sha256)

The warm-start stage that trains and saves the policy is its own package, `hackable_rl.warmstart`.

Modules are imported directly (`from hackable_rl.models.loading import load_policy`): importing
this package does not load torch or transformers.
"""
