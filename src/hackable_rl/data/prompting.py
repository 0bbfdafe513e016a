"""The shared prompt prefix: it states the strict completion format the rewards expect.

The prompt holds the question and the format instructions only; the reference answer never
enters it. Instruct models get the same text wrapped in their chat template at training time
(`hackable_rl.models`), so prepared datasets stay model-independent.
"""

from __future__ import annotations

PROMPT_PREFIX = (
    "Solve the problem. Think inside <think></think>, then give only the final answer in \\boxed{}.\n"
)


def render_prompt(question: str) -> str:
    """The plain-text prompt for one question (the completion starts right after it)."""
    return f"{PROMPT_PREFIX}Problem: {question.strip()}\nAnswer: "


def render_completion(thinking: str, answer: str) -> str:
    """A completion in the strict format: one thinking block, then one boxed answer."""
    return f"<think>{thinking.strip()}</think> \\boxed{{{answer}}}"
