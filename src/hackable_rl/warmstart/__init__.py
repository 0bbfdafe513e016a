"""The warm-start stage (`hackable-rl warmstart`): make the policy partly capable before GRPO, or pin
a pretrained one.

- `data.py`: `SftExample`, `load_sft_examples` (sft.jsonl), the tokenizer corpus
- `sft.py`: `encode_examples`, `collate`, `warmup_cosine`, `sft_steps` (the supervised loop)
- `accuracy.py`: `greedy_accuracy` (shared sampler, strict judge)
- `metrics.py`: what metrics/warmstart.json holds, the target-band warning
- `stage.py`: `run_warmstart`, which ties data -> SFT -> accuracy -> metrics and MLflow

A pretrained source's reference.json (source, pins, weight hashes) comes from `models.reference`.
"""

from hackable_rl.warmstart.stage import run_warmstart

__all__ = ["run_warmstart"]
