"""The training verifier: checkers, corruption channels, ensembles, disagreement (the robust shaping
is the `robust` method's: `hackable_rl.methods.robust`).

Importing this package registers every checker in `CHECKERS` (the natural flaws' modules too). It deliberately does not import
`corruption` or `ensemble`: the independent judge imports `hackable_rl.verifiers.checkers`,
and nothing on its import path may load the code that corrupts rewards. Import those submodules
by name where they are needed (the reward pipeline does).
"""

from hackable_rl.verifiers import early_stop, off_by_one  # noqa: F401  (registers the natural flaws)
from hackable_rl.verifiers.checkers import CheckerOptions, build_checker, clean_checker
from hackable_rl.verifiers.types import Checker, Example, Verdict

__all__ = ["Checker", "CheckerOptions", "Example", "Verdict", "build_checker", "clean_checker"]
