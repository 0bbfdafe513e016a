"""The eval stage (`hackable-rl eval`): a policy (a run's checkpoint, a folder, the base) sampled on
held-out prompts, judged independently and scored by the run's own training verifier on the same
samples (`evaluate`), what is evaluated (`targets`), and a condition's checkpoint curve
(`checkpoint_curve`).

The one part of `evaluation/` that brings the training verifier (and so the corruption code) in, on
a floor of its own above training: the rest of `evaluation/` (the judge, the metrics, paired
comparisons) never imports it (tests/test_judge.py).
"""
