"""Methods: what training optimises from the training verifier's output.

A method is a plain function `method(ensemble: EnsembleRewards, config) -> np.ndarray` returning
the optimised reward per completion ([N], NaN = missing), or an `Optimised` that also hands back the
columns it computed for the records (`robust`: its aggregate and shaped reward), registered by name in `METHODS`
(`config.method` names it, or a `package.module:function`). Every method sees the same ensemble:
the same members, the same corrupted verdicts, the same aggregate and disagreement; what a method
makes of them is its own (`robust` holds the robust shaping and its settings).
A method may carry `check_config(config) -> list[str]`, the problems that make it unusable under a
config, which `hackable-rl validate` (every config load) reports, and `keeps_group_mean(config) ->
bool`: true when its reward must enter GRPO's advantage without the group mean subtracted (the
forward correction; `training/trainer.py`). Adding one is one file here and
one test (docs/extending.md).
"""

from hackable_rl.core.registry import METHODS
from hackable_rl.reward.methods import baseline, corrected, robust  # noqa: F401  (register the built-in methods)

__all__ = ["METHODS"]
