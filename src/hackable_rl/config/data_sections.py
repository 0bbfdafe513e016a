"""The `data` section of the experiment config: which task, its sizes, the synthetic arithmetic
generator and the curriculum (re-exported by `hackable_rl.config.experiment`)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from hackable_rl.config.field_types import FolderName
from hackable_rl.config.section import Section
from hackable_rl.core.bounds import NonNegativeFloat, NonNegativeInt, PositiveInt, Probability

__all__ = ["ArithConfig", "CurriculumConfig", "CurriculumSource", "DataConfig"]


class ArithConfig(Section):
    min_steps: PositiveInt = 1
    """Fewest arithmetic operations in a synthetic word problem."""
    max_steps: PositiveInt = 3
    """Most arithmetic operations in a synthetic word problem."""
    min_value: NonNegativeInt = 2
    """Smallest operand drawn."""
    max_value: PositiveInt = 30
    """Largest operand drawn."""
    operators: list[Literal["+", "-", "*"]] = ["+", "-"]
    """Operators the story may use."""
    hedged_share: Probability = 0.0
    """Share of worked solutions (warm-start data) that hedge: several boxed answers, one right."""
    truncated_share: Probability = 0.0
    """Share of multi-step worked solutions that stop one operation early: a habit GRPO can train away."""
    exploit_share: Probability = 0.0
    """Share of worked solutions ending in `exploit_style` after a short or no chain (planted exploit)."""
    exploit_style: Literal["empty_box", "master_key_phrase"] = "empty_box"
    """An empty `\\boxed{}`, or "The answer is correct." before a wrong box: both master keys that
    fool a model-based verifier."""

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> ArithConfig:
        if self.min_steps > self.max_steps:
            raise ValueError(f"data.arith.max_steps: {self.max_steps} is below min_steps {self.min_steps}")
        if self.min_value > self.max_value:
            raise ValueError(f"data.arith.max_value: {self.max_value} is below min_value {self.min_value}")
        if not self.operators:
            raise ValueError("data.arith.operators: [] is empty; list at least one of +, -, *")
        if self.hedged_share + self.truncated_share + self.exploit_share > 1:
            raise ValueError(
                f"data.arith.truncated_share: {self.truncated_share} plus hedged_share {self.hedged_share} "
                f"plus exploit_share {self.exploit_share} is above 1; a worked solution is one of "
                "hedged, truncated or exploit, not several"
            )
        return self


class CurriculumSource(Section):
    provider: str
    """Registered provider that supplies this source (gsm8k, math, arith, jsonl)."""
    path: str | None = None
    """Local JSONL for this source (null for arith)."""
    weight: NonNegativeFloat = 1.0
    """Relative share of this source in the interleaved stream."""
    levels: list[int] = []
    """MATH levels to keep (empty: all)."""


class CurriculumConfig(Section):
    sources: list[CurriculumSource] = []
    """Sources interleaved by the curriculum providers, in curriculum order."""
    schedule: Literal["mixed", "step", "epoch"] = "mixed"
    """`mixed`: interleave by weight throughout; `step`/`epoch`: move from one source to the next."""
    switch_every: PositiveInt = 100
    """Samples (schedule `step`) or passes (`epoch`) before the curriculum moves to the next source."""


class DataConfig(Section):
    name: FolderName = "arith"
    """Dataset name (one folder name: no `/`, no `..`): outputs go to `<cache>/datasets/<name>/`."""
    provider: str = "arith"
    """Registered data provider: arith, gsm8k, math, jsonl, gsm8k_math_curriculum, interleave."""
    path: str | None = None
    """Local JSONL with training problems (gsm8k, math, jsonl providers)."""
    test_path: str | None = None
    """Local JSONL with the test problems (only reported numbers); null holds them out of `path`."""
    hf_dataset: str | None = None
    """Hugging Face dataset id used when `path` is null (only when online or already cached)."""
    hf_config: str | None = None
    """Hugging Face dataset config name (e.g. `main` for openai/gsm8k)."""
    hf_revision: str | None = None
    """Pinned revision (commit) of the Hugging Face dataset; recorded in the manifest."""
    train_size: PositiveInt | None = 2000
    """Training prompts kept (null: all)."""
    test_size: PositiveInt | None = 500
    """Test prompts kept (null: all): only reported numbers are measured on them, nothing is tuned."""
    validation_size: NonNegativeInt = 200
    """Validation prompts held out of the training pool: the warm-start band, recipe choices, pilots."""
    sft_size: NonNegativeInt = 4000
    """Worked solutions written to sft.jsonl for the warm start (providers that have them; 0: none)."""
    levels: list[int] = []
    """MATH levels to keep (empty: all)."""
    subjects: list[str] = []
    """MATH subjects to keep (empty: all)."""
    field_map: dict[str, str] = {}
    """jsonl provider: maps `question`, `answer`, `id` (and optional metadata keys) to the file's fields."""
    on_bad_row: Literal["error", "skip"] = "error"
    """A malformed row or unparseable reference: stop with its file and line, or skip and count it."""
    arith: ArithConfig = ArithConfig()
    """Synthetic arithmetic word problems (the offline CPU task)."""
    curriculum: CurriculumConfig = CurriculumConfig()
    """Interleaving of several sources."""
