"""Independent evaluation: the clean judge, the metrics of spec section 6, and (later) `eval --run-id`.

Nothing here imports `hackable_rl.reward.corruption`: the judge must never see the corrupted
rewards the policy was trained on (tests/test_judge.py checks the import graph).
"""
