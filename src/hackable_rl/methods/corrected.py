"""corrected: the backward correction of Cai et al. 2025 (arXiv 2510.00915) for known noise rates.

A corrupted member that pays a wrong answer with probability rho0 (false positive) and denies a
right one with probability rho1 (false negative) has E[r_obs | r] = rho0 + (1 - rho0 - rho1) r, so

    r_hat = (r_obs - rho0) / (1 - rho0 - rho1)

is an unbiased estimate of its clean reward r (it leaves [0, 1]: a 1 becomes > 1, a 0 becomes < 0).
Each corrupted member's reward is corrected, the uncorrupted ones are kept, and the configured
aggregation combines them (unbiased for `mean`, which is linear). The rates come from
`correction.rho0/rho1`, else from the channel where it knows them (`noise_rates()`: flip,
asymmetric, missing, confidence); rho0 + rho1 >= 1 leaves nothing to correct (flip at 0.5 carries no
signal) and is refused when the config loads. Only the backward correction is implemented here.
"""

from __future__ import annotations

import numpy as np

from hackable_rl.registry import register_method
from hackable_rl.verifiers.checkers import CheckerOptions
from hackable_rl.verifiers.corruption import build_channel
from hackable_rl.verifiers.ensemble import aggregate
from hackable_rl.verifiers.training_verifier import EnsembleRewards


def noise_rates(config) -> tuple[float, float] | None:
    """(rho0, rho1) of every corrupted member: from `correction`, else the channel's; None if unknown."""
    rho0, rho1 = config.correction.rho0, config.correction.rho1
    if rho0 is not None and rho1 is not None:
        return rho0, rho1
    channel = build_channel(config.corruption, CheckerOptions.from_config(config))
    known = (0.0, 0.0) if channel is None else getattr(channel, "noise_rates", lambda: None)()
    if known is None:
        return None
    return (known[0] if rho0 is None else rho0), (known[1] if rho1 is None else rho1)


def check_config(config) -> list[str]:
    """Why `method: corrected` cannot run under `config` (nothing when it can)."""
    rates = noise_rates(config)
    if rates is None:
        return [f"correction: channel {config.corruption.channel!r} has no known noise rates; "
                "set correction.rho0 and correction.rho1 for method corrected"]
    if rates[0] + rates[1] >= 1.0:
        return [f"correction: rho0 + rho1 = {rates[0] + rates[1]:g} >= 1: the channel carries no signal "
                "to correct (flip at rate 0.5) or inverts it; method corrected needs rho0 + rho1 < 1"]
    return []


@register_method("corrected")
def corrected(ensemble: EnsembleRewards, config) -> np.ndarray:
    """Each corrupted member's reward backward-corrected, then aggregated (`verifier.aggregation`)."""
    rho0, rho1 = noise_rates(config)
    corrupted = np.array([member.corrupted for member in config.verifier.members])  # [M]
    unbiased = (ensemble.rewards - rho0) / (1.0 - rho0 - rho1)  # [N, M]; NaN (missing) stays NaN
    rewards = np.where(corrupted[None, :], unbiased, ensemble.rewards)
    return aggregate(rewards, ensemble.confidences, config.verifier.aggregation)


corrected.check_config = check_config
