"""Data providers, the prompt format and the prepare stage.

Importing this package registers every provider in `DATA_PROVIDERS`: gsm8k, math, jsonl (in
`providers`), arith, interleave and gsm8k_math_curriculum.
"""

from hackable_rl.data import arith, curriculum, providers  # noqa: F401  (registers the providers)
from hackable_rl.data.prepare import PrepareResult, load_split, prepare_dataset, read_prepared
from hackable_rl.data.providers import ProviderOutput, question_key
from hackable_rl.data.schema import TrainingSample

__all__ = [
    "PrepareResult",
    "ProviderOutput",
    "TrainingSample",
    "load_split",
    "prepare_dataset",
    "question_key",
    "read_prepared",
]
