"""The tiny model's tokenizer: byte-level BPE trained on the task corpus, digits one per token.

Splitting digits keeps numbers compositional (the model sees `4`, `2`, not a learned `42`), which
is what lets a 1M-parameter model do column arithmetic. The tokenizer is wrapped in
`PreTrainedTokenizerFast` and must be reloaded with `PreTrainedTokenizerFast.from_pretrained`
(`load_tokenizer`): `AutoTokenizer` on a `qwen2` model folder substitutes Qwen's own pre-tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_json

__all__ = ["EOS_TOKEN", "PAD_TOKEN", "CHAT_TEMPLATE", "train_tokenizer", "load_tokenizer"]

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
# A minimal role-tagged template so chat-style callers work; the tiny model itself is trained and
# prompted on plain text (see `format_prompt`), so this template never reaches its training data.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# Tokenizer classes that `save_pretrained` writes for a tokenizers-backed fast tokenizer
# (transformers 5 calls it TokenizersBackend); these must not go through AutoTokenizer.
_PLAIN_FAST_CLASSES = {"TokenizersBackend", "PreTrainedTokenizerFast"}


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Trains a byte-level BPE on `texts` (deterministic for the same texts and size)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes: no unknown token
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        padding_side="left",  # generation pads on the left so every completion starts at the same column
        clean_up_tokenization_spaces=False,  # decode(encode(x)) == x, spaces before punctuation included
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def load_tokenizer(folder: Path, **kwargs) -> PreTrainedTokenizerBase:
    """Loads a saved tokenizer with the right class and left padding; a pad token is always set.
    A truncated or hand-edited tokenizer file is a UserError naming the file and line."""
    for name in ("tokenizer_config.json", "tokenizer.json"):
        if (Path(folder) / name).is_file():
            read_json(Path(folder) / name)  # not JSON: file:line, instead of a traceback from the loader
    tokenizer_class = _saved_tokenizer_class(folder)
    try:
        if tokenizer_class in _PLAIN_FAST_CLASSES:
            tokenizer = PreTrainedTokenizerFast.from_pretrained(folder, **kwargs)
        else:
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False, **kwargs)
    except (OSError, ValueError) as error:
        raise UserError(f"{folder}: no loadable tokenizer ({error})") from None
    return prepare_for_generation(tokenizer)


def prepare_for_generation(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Left padding, and the eos token as pad when a pretrained tokenizer ships without one."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise UserError(f"tokenizer {tokenizer.name_or_path}: has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _saved_tokenizer_class(folder: Path) -> str | None:
    config_path = Path(folder) / "tokenizer_config.json"
    if not config_path.exists():
        return None
    return json.loads(config_path.read_text(encoding="utf-8")).get("tokenizer_class")
