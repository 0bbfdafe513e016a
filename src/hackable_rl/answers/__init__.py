"""Answers: extraction (boxed, strict format, `#### N`, numbers) and equivalence (numeric, math-verify).

The bottom floor of the package: rewards, verifiers, the judge and the data providers read answers
through it, and it imports none of them (only `registry.import_from_path`, to load a plugin comparer
in the math-verify worker).
"""

from hackable_rl.answers.numbers import normalize_number
from hackable_rl.answers.parsing import (
    StrictCompletion,
    answers_match,
    completion_text,
    extract_all_boxed,
    extract_answer_cascade,
    extract_boxed,
    extract_last_number,
    parse_reference,
    parse_strict,
)

__all__ = [
    "StrictCompletion",
    "answers_match",
    "completion_text",
    "extract_all_boxed",
    "extract_answer_cascade",
    "extract_boxed",
    "extract_last_number",
    "normalize_number",
    "parse_reference",
    "parse_strict",
]
