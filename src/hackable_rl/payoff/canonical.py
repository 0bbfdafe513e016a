"""The canonical completions a payoff table prices: the honest ones (a strict right and a strict wrong
answer, no answer) and every checker's exploit (`CheckerSpec.exploits`), each built per prompt with
the wrong answer it boxes (`wrong_answer`, avoiding what any natural flaw of the grid pays)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.registry import CHECKERS, Exploit
from hackable_rl.reward.checkers import checker_defaults
from hackable_rl.reward.corruption import configured_flaw
from hackable_rl.reward.types import Example

__all__ = ["HONEST", "builders", "canonical_names", "checker_exploits", "exploit_names", "named_checkers", "row_example",
           "short_name", "wrong_answer"]

Build = Callable[[str, str, str, str], str]
"""(open tag, close tag, reference, a wrong answer) -> completion text."""
Answer = Callable[[Example], str | None]
"""An exploit's own wrong answer on a prompt (`Exploit.answer`)."""
HONEST: dict[str, Build] = {
    "strict_correct": lambda o, c, ref, wrong: f"{o}I work it out.{c} \\boxed{{{ref}}}",
    "strict_wrong": lambda o, c, ref, wrong: f"{o}I work it out.{c} \\boxed{{{wrong}}}",
    "no_answer": lambda o, c, ref, wrong: f"{o}I work it out.{c} I cannot tell.",
}
"""The honest canonical completions, by name; every other canonical completion is a checker's
exploit, declared by the checker (`CheckerSpec.exploits`)."""
HONEST_SHORT = {"strict_correct": "right", "strict_wrong": "wrong", "no_answer": "none"}
"""Column heads of the printed table (payoff.json keeps the full names)."""


def checker_exploits(checkers: Sequence[str] = ()) -> dict[str, tuple[str, Exploit]]:
    """exploit name -> (its checker, the exploit): every registered checker's, then those of the
    `checkers` named by `package.module:attr`, in that order."""
    named = list(CHECKERS.items())
    named += [(name, CHECKERS.get(name)) for name in dict.fromkeys(checkers) if name not in CHECKERS]
    return {exploit.name: (name, exploit) for name, spec in named for exploit in spec.exploits}


def canonical_names(checkers: Sequence[str] = ()) -> list[str]:
    """The canonical completions: the honest ones, then every exploit (`checker_exploits`)."""
    return [*HONEST, *checker_exploits(checkers)]


def exploit_names(checkers: Sequence[str] = ()) -> list[str]:
    return list(checker_exploits(checkers))


def short_name(name: str) -> str:
    """A canonical completion's column head in the printed table."""
    exploits = checker_exploits()
    return HONEST_SHORT.get(name) or (exploits[name][1].short if name in exploits else name)


def named_checkers(config: ExperimentConfig) -> list[str]:
    """Every checker a config names: its members' and its flaw channel's."""
    flaw = configured_flaw(config.corruption)
    return [member.checker for member in config.verifier.members] + ([flaw] if flaw else [])


def wrong_answer(reference: str, paid_by_patterns: frozenset[float] = frozenset()) -> str:
    """A plausible wrong answer: the reference number plus the smallest step of one or more that no
    natural flaw of the grid pays on the prompt (`paid_by_patterns`), so that it is wrong under every
    member (without a natural flaw in the grid, the reference plus one); a non-number gets -1."""
    try:
        number = float(reference.replace(",", ""))
    except ValueError:
        return "-1"
    step = 1
    while number + step in paid_by_patterns:
        step += 1
    return str(int(number) + step) if number.is_integer() else f"{number + step:g}"


def row_example(row: Mapping[str, Any]) -> Example:
    """A prepared prompt row as the checkers' Example."""
    return Example(str(row["id"]), str(row["reference"]), row.get("metadata") or {})


def builders(config: ExperimentConfig, checkers: Sequence[str]) -> dict[str, tuple[Build, Answer | None]]:
    """Every canonical completion's builder under `config`, with the wrong answer it boxes where it
    chooses one (a natural flaw's exploit boxes its pattern's answer): each exploit built with its
    checker's settings (the `checker_kwargs` of the first member that carries it, else its defaults)."""
    given: dict[str, Mapping[str, Any]] = {}
    for member in config.verifier.members:
        given.setdefault(member.checker, member.checker_kwargs)
    builders: dict[str, tuple[Build, Answer | None]] = {name: (build, None) for name, build in HONEST.items()}
    for name, (checker, exploit) in checker_exploits(checkers).items():
        settings = checker_defaults(checker) | dict(given.get(checker, {}))
        builders[name] = (functools.partial(exploit.build, **settings), exploit.answer)
    return builders
