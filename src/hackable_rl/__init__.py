"""hackable-rl: GRPO on verifiable maths against imperfect verifiers."""

__version__ = "0.1.0"
