"""Evaluation: the independent judge, the metrics of spec section 6, paired comparisons across
replicates, and the eval stage (`stage/`: a policy sampled, judged and scored by its run's training
verifier).

Nothing here but `stage/` imports `hackable_rl.reward.corruption`: the judge must never see the
corrupted rewards the policy was trained on (tests/test_judge.py checks the import graph). The stage
sits on a floor of its own above training (tests/test_architecture.py).
"""
