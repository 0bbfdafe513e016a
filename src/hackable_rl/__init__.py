"""hackable-rl: GRPO on verifiable maths against imperfect verifiers."""

from hackable_rl.core.numerics import pin_cpu_dispatch

pin_cpu_dispatch()  # before anything imports torch: the same float results on every x86-64 CPU

__version__ = "0.1.0"

