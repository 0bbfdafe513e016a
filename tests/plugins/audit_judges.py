"""Audit judges for tests/test_alarm_audit.py (`alarm.audit.judge: audit_judges:<name>`, this folder on sys.path)."""

from __future__ import annotations


def even_length(completion: str, reference: str) -> bool:
    """A stand-in judge with mixed verdicts on the tiny policy (whose answers are all wrong): right when
    the completion has an even number of characters, so the audit's draw has both kinds to count."""
    return len(completion) % 2 == 0


def not_a_verdict(completion: str, reference: str) -> str:
    """What a judge must not return: a word, not True/False or a Judgment."""
    return "yes"
