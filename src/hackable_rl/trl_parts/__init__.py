"""hackable-rl's parts for your own TRL script (docs/own-trl-script.md): no config file, no CLI.

    args = GRPOConfig(..., num_generations=4, report_to="mlflow")          # the group size: set here only
    reward = verifier_reward(members=["clean"], channel="flip", rate=0.4, args=args)  # TRL's reward contract
    trainer = GRPOTrainer(model, reward_funcs=[reward], args=args,
                          callbacks=[GenerationTraceCallback(reward), HackingAlarmCallback(reward)])
    reward.last_step_records()                                                # the latest step's records
    judge([{"completion": ..., "reference": ...}])                            # the independent judge

Each part is built from the same code the `hackable-rl` CLI runs, not a copy of it: `verifier_reward`
builds the project's reward pipeline (`reward.pipeline`) from keyword arguments validated by the
project's config schema, and the training reward over it (`reward.pipeline.ObjectiveReward.of`, as
`hackable-rl train` does), which scores, computes GRPO's advantages and judges every completion into
a generation record;
`GenerationTraceCallback` writes each step's records as the MLflow trace `hackable-rl train` writes
(`tracking.traces`); `HackingAlarmCallback` feeds them to the onset alarm (`alarm.signals`,
`alarm.onset_alarm`); `judge` is `hackable-rl judge`'s judge. A wrong argument is one ValueError naming
it, raised when the part is built.

Import it before torch, transformers and TRL: `hackable_rl` pins PyTorch's CPU kernels before torch loads,
so the numbers match `hackable-rl train`'s on every x86 CPU (`core.numerics`); imported after torch on a CPU
where that changes them, it warns in one line saying what to change.
"""

import warnings

from hackable_rl.core.numerics import dispatch_mismatch

if (_mismatch := dispatch_mismatch()) is not None:  # torch came first: say what to change, once, in one line
    warnings.warn(f"hackable_rl.trl_parts: {_mismatch}", RuntimeWarning, stacklevel=2)

from hackable_rl.trl_parts.callbacks import GenerationTraceCallback, HackingAlarmCallback  # noqa: E402  (after the check)
from hackable_rl.trl_parts.reward import VerifierReward, judge, verifier_reward  # noqa: E402

__all__ = ["GenerationTraceCallback", "HackingAlarmCallback", "VerifierReward", "judge", "verifier_reward"]
