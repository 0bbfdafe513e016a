"""What an extension declares: the small frozen dataclasses a registry holds each reward, method,
checker and channel in (`RewardSpec.needs`, `MethodSpec.check_config` / `keeps_group_mean` / `settings`
/ `report_role`, `CheckerSpec.superset_of_clean` / `exploits`, `ChannelSpec.restates_accuracy`),
whose fields are those declarations, and a checker's canonical exploit (`Exploit`). The registries
(`core.registry`) hold them and hand them out under these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hackable_rl.core.errors import RegistryError

NEEDS = {
    "tags": "open_tag/close_tag from rewards.think_open/think_close",
    "tokenizer": "tokenizer=: the policy's tokenizer (when there is one)",
    "correctness": "correctness=: the training verifier's optimised reward per completion (missing imputed)",
    "verifier_reward": "the component *is* the training verifier's optimised reward (the function is not called)",
}
"""What a reward may declare it needs (`RewardSpec.needs`); `reward.objectives.Components` supplies it."""


def _no_problems(config: Any) -> list[str]:
    return []


def _never(config: Any) -> bool:
    return False


def _no_twin(config: Any) -> str | None:
    return None


@dataclass(frozen=True)
class RewardSpec:
    """A registered reward: the plain function (TRL's contract) and what it needs from the run."""

    function: Callable[..., list[float | None]]
    needs: frozenset[str] = frozenset()
    """Keys of NEEDS: `tags`, `tokenizer`, `correctness`, `verifier_reward`."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.needs) - set(NEEDS))
        if unknown:
            raise RegistryError(f"needs{unknown}: unknown; valid: {', '.join(NEEDS)}")
        object.__setattr__(self, "needs", frozenset(self.needs))

    def __call__(self, completions: Any, **columns: Any) -> list[float | None]:
        return self.function(completions, **columns)


REFERENCE = "reference"
"""A method's report role: the method every other method of a study is compared against."""


TREATMENT = "treatment"
"""A method's report role: compared against the reference method in the same cell."""


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: `function(ensemble, config) -> optimised [N]` and what it declares; a
    method with `settings` is called as `function(ensemble, config, settings)`."""

    function: Callable[..., Any]
    check_config: Callable[[Any], list[str]] = _no_problems
    """Why the method cannot run under a config (one line each; nothing when it can), checked when
    the config's names resolve and per payoff cell."""
    keeps_group_mean: Callable[[Any], bool] = _never
    """Whether the optimised reward enters the advantage whole under a config (training adds its
    group mean back to TRL's advantage: the forward correction)."""
    settings: type | None = None
    """The Pydantic model of the method's own settings (`method_kwargs`), validated when the config's
    names resolve; None: the method takes none."""
    report_role: str = TREATMENT
    """`reference` (every other method of a study is compared against it) or `treatment`."""
    uses_known_rates: bool = False
    """It reads each member's known noise rates (`verifier.members[].noise_rates`, else the
    channel's), so a study's measured flaw rates are what it is given."""
    affine_to: Callable[[Any], str | None] = _no_twin
    """The method whose optimised reward this one's is, under a config, a positive affine map of on
    every completion (a x r + b, a > 0): GRPO's group centring removes b and Adam's normalisation a
    (up to its epsilon and gradient clipping), so the two train alike and are never tested against
    each other. None where it is not."""

    def __post_init__(self) -> None:
        if self.report_role not in (REFERENCE, TREATMENT):
            raise RegistryError(f"report_role {self.report_role!r}: expected {REFERENCE!r} or {TREATMENT!r}")

    def settings_of(self, config: Any) -> Any:
        """The method's settings from `config.method_kwargs` (None for a method without settings)."""
        return None if self.settings is None else self.settings.model_validate(config.method_kwargs)

    def __call__(self, ensemble: Any, config: Any, settings: Any = None) -> Any:
        if self.settings is None:
            return self.function(ensemble, config)
        return self.function(ensemble, config, self.settings_of(config) if settings is None else settings)


@dataclass(frozen=True)
class Exploit:
    """A canonical completion that exploits a flawed checker: the payoff table prices it."""

    name: str
    """Its column in payoff.json."""
    short: str
    """Its column head in the printed table."""
    build: Callable[..., str]
    """`build(open_tag, close_tag, reference, wrong_answer, **checker_settings) -> completion text`."""
    answer: Callable[[Any], str | None] | None = None
    """The wrong answer it boxes on an example (`reward.types.Example`: a natural flaw's pattern
    needs the prompt's chain); None here, or its returning None, boxes a generic wrong answer."""


@dataclass(frozen=True)
class CheckerSpec:
    """A registered checker: `function(completion, example, options=..., **settings) -> Verdict` and
    what it declares. Its settings are its keyword parameters after `options` (`checker_kwargs`)."""

    function: Callable[..., Any]
    superset_of_clean: bool = False
    """It accepts everything `clean` accepts (only false positives, never a false negative), so a
    `flaw` channel mixing it in at rate p knows its noise rates are at most (p, 0)."""
    exploits: tuple[Exploit, ...] = ()
    """The canonical completions that exploit it: the payoff table prices each."""
    pattern: Callable[[Any], frozenset[float]] | None = None
    """A natural flaw's pattern: the wrong answers it pays on an example (`Example -> values`), an
    error the policy makes by itself (`reward/early_stop.py`). The payoff's strict wrong answer
    avoids the values of every natural flaw its grid names, so that it stays wrong under each."""

    def __call__(self, completion: str, example: Any, **kwargs: Any) -> Any:
        return self.function(completion, example, **kwargs)


@dataclass(frozen=True)
class ChannelSpec:
    """A registered corruption channel: `factory(rate, options, **settings) -> Channel` and what it declares."""

    function: Callable[..., Any]
    restates_accuracy: bool = False
    """Under it the hacking gap restates accuracy: its expectation is p(1 - 2 acc) whatever the
    policy learnt (docs/metrics.md, "Excess gap"), so a report labels the gap so."""

    def __call__(self, rate: float, options: Any, **settings: Any) -> Any:
        return self.function(rate, options, **settings)
