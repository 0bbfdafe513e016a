"""corrected: the known-rate corrections of Cai et al. 2025 (arXiv 2510.00915), backward or forward.

A corrupted member that pays a wrong answer with probability rho0 (false positive) and denies a
right one with probability rho1 (false negative) has E[r_obs | r] = rho0 + (1 - rho0 - rho1) r.

backward (`method_kwargs.kind: backward`, the default) optimises the unbiased estimate of the clean r,

    r_hat = (r_obs - rho0) / (1 - rho0 - rho1)

(it leaves [0, 1]: a 1 becomes > 1, a 0 becomes < 0).

forward weights each sample's score-function term by w1 = rho1 (observed 1) or w0 = rho1 - 1
(observed 0), that is w = r_obs - (1 - rho1). Then E[w | r] = -(1 - rho0 - rho1)(1 - r), and since
the score function has mean zero, E[w grad log pi] = (1 - rho0 - rho1) grad J: the clean gradient's
direction, from rho1 alone. The weight is the advantage itself: GRPO's group mean would cancel the
constant shift that makes it a correction (and leave baseline), so this method declares
`keeps_group_mean` and training adds the group mean of w back to TRL's advantage (additive objectives
only: there the other components are still group-centred). An uncorrupted member is forward-weighted
with rho1 = 0 (w = r - 1).

Each member is corrected with its own rates and the configured aggregation combines them (exact for
`mean`, which is linear). A member's rates are its `verifier.members[].noise_rates` where set (a
member whose checker is itself flawed: a systematic blind spot no channel knows); else, for a
corrupted member, the method's `rho0`/`rho1` (`CorrectionSettings`), else the channel's where it knows them (`noise_rates()`:
flip, asymmetric, missing, confidence); an uncorrupted member has (0, 0): kept (backward) or weighted
with rho1 = 0 (forward). rho0 + rho1 >= 1 leaves nothing to correct (flip at 0.5 carries no signal)
and is refused when the config loads.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from hackable_rl.core.bounds import Probability
from hackable_rl.core.registry import register_method
from hackable_rl.reward.checkers import CheckerOptions
from hackable_rl.reward.corruption import build_channel
from hackable_rl.reward.ensemble import EnsembleRewards, Rates, aggregate
from hackable_rl.reward.verifier import member_noise_rates


class CorrectionSettings(BaseModel):
    """`method_kwargs` of `method: corrected`: the correction and its known noise rates (Cai et al.
    2025). A null rate takes the configured channel's where it knows it (flip, asymmetric, missing,
    confidence, none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["backward", "forward"] = "backward"
    """backward: the unbiased reward (r - rho0) / (1 - rho0 - rho1); forward: the score-function
    weight r - (1 - rho1), with the group mean of that weight kept in the advantage (needs only rho1;
    docs/methodology.md, "The known-rate correction")."""
    rho0: Probability | None = None
    """False-positive rate P(observed 1 | clean 0) of each corrupted member; null: the channel's."""
    rho1: Probability | None = None
    """False-negative rate P(observed 0 | clean 1) of each corrupted member; null: the channel's."""

    @property
    def given(self) -> Rates:
        return self.rho0, self.rho1


def _settings(config) -> CorrectionSettings:
    return CorrectionSettings.model_validate(config.method_kwargs)


def member_rates(config) -> list[Rates]:
    """Each member's (rho0, rho1) under `config` (`member_noise_rates`, the settings' rates in front);
    an unknown rate is None."""
    channel = build_channel(config.corruption, CheckerOptions.from_config(config))
    return member_noise_rates(config, channel, _settings(config).given)


def check_config(config) -> list[str]:
    """Why `method: corrected` cannot run under `config` (nothing when it can)."""
    if _settings(config).kind == "forward":
        return _forward_problems(config)
    rates = member_rates(config)
    if any(rho0 is None or rho1 is None for rho0, rho1 in rates):
        return [f"method_kwargs: channel {config.corruption.channel!r} has no known noise rates; "
                "set method_kwargs.rho0 and method_kwargs.rho1 (or each member's noise_rates) for method corrected"]
    return [problem for rho0, rho1 in dict.fromkeys(rates) for problem in _no_signal(rho0, rho1)]


def _forward_problems(config) -> list[str]:
    rates = member_rates(config)
    if any(rho1 is None for _, rho1 in rates):
        return [f"method_kwargs: channel {config.corruption.channel!r} has no known false-negative rate; "
                "set method_kwargs.rho1 for the forward correction"]
    problems = [p for rho0, rho1 in dict.fromkeys(rates) if rho0 is not None for p in _no_signal(rho0, rho1)]
    if config.objective.mode != "additive":
        problems.append("method_kwargs.kind: forward adds the weight's group mean to an additive objective's "
                        f"advantage; objective.mode is {config.objective.mode!r}")
    if config.trainer.scale_rewards != "none":
        problems.append("method_kwargs.kind: forward weights are advantages and must not be rescaled; "
                        f"set trainer.scale_rewards: none (it is {config.trainer.scale_rewards!r})")
    return problems


def _no_signal(rho0: float, rho1: float) -> list[str]:
    if rho0 + rho1 >= 1.0:
        return [f"method_kwargs: rho0 + rho1 = {rho0 + rho1:g} >= 1: the channel carries no signal "
                "to correct (flip at rate 0.5) or inverts it; method corrected needs rho0 + rho1 < 1"]
    return []


def _with_given(ensemble: EnsembleRewards, config, settings: CorrectionSettings) -> list[Rates]:
    """The verifier's member rates with the settings' rates in front for each corrupted member that
    has no rates of its own (the verifier read the channel's once, when it was built)."""
    rates = []
    for member, known in zip(config.verifier.members, ensemble.noise_rates, strict=True):
        if member.corrupted and member.noise_rates is None:
            known = tuple(given if given is not None else rate for given, rate in zip(settings.given, known, strict=True))
        rates.append(known)
    return rates


def corrected(ensemble: EnsembleRewards, config, settings: CorrectionSettings) -> np.ndarray:
    """Each member's reward corrected with its own rates (`member_rates`, `settings.kind`), then
    aggregated (`verifier.aggregation`); a member with rates (0, 0) is kept as it is (backward)."""
    rates = np.array(_with_given(ensemble, config, settings), dtype=float)  # [M, 2]
    rho0, rho1 = rates[None, :, 0], rates[None, :, 1]  # [1, M]
    if settings.kind == "forward":
        rewards = ensemble.rewards - (1.0 - rho1)  # w1 = rho1, w0 = rho1 - 1; NaN stays NaN
    else:
        rewards = (ensemble.rewards - rho0) / (1.0 - rho0 - rho1)  # [N, M]; exact identity at (0, 0)
    return aggregate(rewards, ensemble.confidences, config.verifier.aggregation)


def keeps_group_mean(config) -> bool:
    """True when the optimised reward enters the advantage whole (the forward weight)."""
    return _settings(config).kind == "forward"


def affine_to(config) -> str | None:
    """`baseline` where the backward correction is one affine map of baseline's reward: every member
    has the same known rates, so each is mapped by the same (r - rho0) / (1 - rho0 - rho1), and the
    mean of the mapped rewards is that map of their mean (the blind-spot study's k3, every J-sweep
    cell). The forward weight keeps its group mean in the advantage, so a shift is not removed there."""
    if _settings(config).kind != "backward" or config.verifier.aggregation != "mean":
        return None
    rates = set(member_rates(config))
    if len(rates) != 1 or None in next(iter(rates)):
        return None
    rho0, rho1 = next(iter(rates))
    return "baseline" if rho0 + rho1 < 1.0 else None


register_method("corrected", check_config=check_config, keeps_group_mean=keeps_group_mean,
                settings=CorrectionSettings, uses_known_rates=True, affine_to=affine_to)(corrected)
