"""The reward as one job: from a completion to the float TRL sees. Read `pipeline.py` first: it tells
the story in one screen (each member's checker -> its corruption channel -> the ensemble -> the
method -> the objective -> the float, and the record of every step), each step one module beside it.

Importing this package registers every checker in `CHECKERS` (the natural flaws' modules too). It
deliberately imports nothing that corrupts: the independent judge imports `reward.checkers`, and
nothing on its import path may load `corruption`; import the other modules by name where needed.
"""

from hackable_rl.reward import early_stop, off_by_one  # noqa: F401  (registers the natural flaws)
from hackable_rl.reward.checkers import CheckerOptions, build_checker, clean_checker
from hackable_rl.reward.types import Checker, Example, Verdict

__all__ = ["Checker", "CheckerOptions", "Example", "Verdict", "build_checker", "clean_checker"]
