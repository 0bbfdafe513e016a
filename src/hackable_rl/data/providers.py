"""File-backed providers: GSM8K, MATH and any JSONL with a field mapping.

A provider is `provider(config: DataConfig, seed: int) -> ProviderOutput`. The file providers share
one split rule (`split_sources`): test comes from `data.test_path` (or the hub's test split) when
given, else `data.test_size` problems are held out of `data.path` in a seed-fixed order; then
`data.validation_size` validation problems are held out of the training pool, worked solutions (sft)
are taken next, and training problems last, so the four are disjoint by construction.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hackable_rl.config.experiment import DataConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import register_data_provider
from hackable_rl.data.prompting import render_completion
from hackable_rl.data.schema import TrainingSample
from hackable_rl.data.sources import (
    BadRows,
    RowError,
    SourceRows,
    convert_rows,
    parsed_reference,
    read_hub,
    read_local,
    required_text,
    shuffled,
    take,
)

Converter = Callable[[str, dict[str, Any]], TrainingSample | None]


@dataclass(frozen=True)
class ProviderOutput:
    """What every provider returns; `prepare` writes it, checks disjointness and records the manifest."""

    train: list[TrainingSample]
    """GRPO prompts."""
    test: list[TrainingSample]
    """Reported numbers only: nothing is tuned or checked on it during development."""
    validation: list[TrainingSample] = field(default_factory=list)
    """Everything tuned or checked during development (warm-start band, recipe choices, pilots)."""
    sft: list[TrainingSample] = field(default_factory=list)
    """Worked solutions for the warm start (empty when the provider has none or data.sft_size is 0)."""
    sources: list[dict[str, Any]] = field(default_factory=list)
    """Manifest entries of the sources read or generated."""
    skipped: list[str] = field(default_factory=list)
    """One `location: problem` line per bad row skipped under data.on_bad_row: skip."""


def question_key(question: str) -> str:
    """Hash of the normalised question (NFKC, casefolded, whitespace collapsed): the disjointness key."""
    normal = " ".join(unicodedata.normalize("NFKC", question).casefold().split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FileSpec:
    """How one file provider finds its data and turns a row into a sample."""

    name: str
    convert: Converter
    hint: str
    """How to obtain the data when it is missing (copy a shared file, or the hub id)."""
    hub_splits: tuple[str, str | None] = ("train", "test")


def split_sources(config: DataConfig, seed: int, spec: FileSpec) -> ProviderOutput:
    """Reads train (and test) sources, converts rows, and splits test / validation / sft / train disjointly."""
    bad_rows = BadRows(config.on_bad_row)
    train_source = _train_source(config, spec, bad_rows)
    test_source = _test_source(config, spec, bad_rows)
    pool = shuffled(convert_rows(train_source, spec.convert, bad_rows), seed, f"{spec.name}:train")
    sources = [train_source.manifest | {"role": "train"}]
    if test_source is None:
        if config.test_size is None:
            raise UserError(
                "data.test_size: null holds out nothing from data.path; set a number of test problems "
                "or point data.test_path at a held-out file"
            )
        test, pool = pool[: config.test_size], pool[config.test_size :]
    else:
        test = shuffled(convert_rows(test_source, spec.convert, bad_rows), seed, f"{spec.name}:test")
        test = take(test, config.test_size)
        sources.append(test_source.manifest | {"role": "test"})
    validation, pool = pool[: config.validation_size], pool[config.validation_size :]
    sft, pool = _take_solutions(pool, config.sft_size)
    train = [_without_solution(sample) for sample in take(pool, config.train_size)]
    return ProviderOutput(
        train, [_without_solution(s) for s in test], [_without_solution(s) for s in validation],
        sft, sources, bad_rows.messages,
    )


def _train_source(config: DataConfig, spec: FileSpec, bad_rows: BadRows) -> SourceRows:
    if config.path:
        return read_local(config.path, bad_rows, spec.hint)
    if config.hf_dataset:
        return read_hub(
            config.hf_dataset, config.hf_config, config.hf_revision, spec.hub_splits[0], spec.hint
        )
    raise UserError(f"data.path: not set for provider {spec.name!r}; {spec.hint}")


def _test_source(config: DataConfig, spec: FileSpec, bad_rows: BadRows) -> SourceRows | None:
    if config.test_path:
        return read_local(config.test_path, bad_rows, spec.hint, field_name="data.test_path")
    if not config.path and config.hf_dataset and spec.hub_splits[1]:
        return read_hub(
            config.hf_dataset, config.hf_config, config.hf_revision, spec.hub_splits[1], spec.hint
        )
    return None


def _take_solutions(
    pool: list[TrainingSample], size: int
) -> tuple[list[TrainingSample], list[TrainingSample]]:
    """Moves up to `size` samples that have a worked solution from the pool into the sft split."""
    if size == 0 or not any(sample.solution for sample in pool):
        return [], pool
    sft, rest = [], []
    for sample in pool:
        (sft if sample.solution and len(sft) < size else rest).append(sample)
    return sft, rest


def _without_solution(sample: TrainingSample) -> TrainingSample:
    # Train, validation and test rows never carry a worked solution: only the warm start reads them (from sft.jsonl).
    return replace(sample, solution=None)


# --------------------------------------------------------------------------- gsm8k

_CALCULATOR = re.compile(r"<<[^>]*>>")
GSM8K_HINT = (
    "copy the GSM8K JSONL there (this repository carries it: data/gsm8k/train.jsonl and test.jsonl, "
    "../../data/gsm8k/... from a pipelines/<study> folder), "
    "or set data.hf_dataset: openai/gsm8k, data.hf_config: main and a pinned data.hf_revision when online"
)


def gsm8k_sample(where: str, row: dict[str, Any]) -> TrainingSample:
    """A GSM8K row (`question`, `answer` = worked solution ending `#### N`) as a sample."""
    question = required_text(row, "question")
    answer = required_text(row, "answer")
    if "####" not in answer:  # the parser would take the whole worked solution as a bare answer
        raise RowError(f"field 'answer': a GSM8K answer ends in '#### <number>'; this one has no '####' "
                       f"({answer[-60:]!r})")
    reference = parsed_reference(answer, "answer")
    # The worked solution minus its `<<48/2=24>>` calculator notes and the `#### N` line.
    thinking = " ".join(_CALCULATOR.sub("", answer.rpartition("####")[0]).split())
    solution = render_completion(thinking, reference) if thinking else None
    key = question_key(question)[:12]
    return TrainingSample(f"gsm8k-{key}", question, reference, {"source": "gsm8k"}, solution)


@register_data_provider("gsm8k")
def gsm8k_provider(config: DataConfig, seed: int) -> ProviderOutput:
    """GSM8K from data.path (+ data.test_path) or openai/gsm8k on the hub."""
    return split_sources(config, seed, FileSpec("gsm8k", gsm8k_sample, GSM8K_HINT))


# --------------------------------------------------------------------------- math

MATH_HINT = (
    "copy a MATH JSONL (`problem`, `solution`, `answer`, `level`, `subject`) there (this repository "
    "carries MATH-500: data/math500/test.jsonl), or set data.hf_dataset to a MATH dataset id with a pinned "
    "data.hf_revision when online"
)


def _level(row: dict[str, Any]) -> int:
    """`level` as 1..5; the original MATH release writes `"Level 3"`."""
    value = row.get("level")
    text = str(value).removeprefix("Level ").strip() if value is not None else ""
    if not text.isdigit():
        raise RowError(f"field 'level': expected 1..5 or 'Level N', got {value!r}")
    return int(text)


def math_converter(levels: list[int], subjects: list[str]) -> Converter:
    """Converts MATH rows, returning None for rows outside the level / subject filters."""
    wanted_subjects = {subject.casefold() for subject in subjects}

    def convert(where: str, row: dict[str, Any]) -> TrainingSample | None:
        question = required_text(row, "problem")
        level = _level(row)
        subject = str(row.get("subject") or row.get("type") or "")
        if (levels and level not in levels) or (
            wanted_subjects and subject.casefold() not in wanted_subjects
        ):
            return None
        if "answer" in row:
            reference = parsed_reference(required_text(row, "answer"), "answer")
        else:
            reference = parsed_reference(required_text(row, "solution"), "solution")
        ident = str(row.get("unique_id") or question_key(question)[:12])
        metadata = {"source": "math", "level": level, "subject": subject}
        return TrainingSample(f"math-{ident}", question, reference, metadata)

    return convert


@register_data_provider("math")
def math_provider(config: DataConfig, seed: int) -> ProviderOutput:
    """MATH problems filtered by data.levels and data.subjects (MATH solutions are not in the strict format)."""
    spec = FileSpec("math", math_converter(config.levels, config.subjects), MATH_HINT)
    output = split_sources(config, seed, spec)
    if not output.train and not output.test:
        raise UserError(
            f"data.levels / data.subjects: no MATH problem matches levels {config.levels} and subjects "
            f"{config.subjects} (levels are 1..5; subjects such as Algebra, Geometry, Prealgebra)"
        )
    return output


# --------------------------------------------------------------------------- jsonl

JSONL_HINT = "point data.path (and data.test_path) at your JSONL file and map its fields with data.field_map"
_CORE_FIELDS = ("question", "answer", "id")


def jsonl_converter(field_map: dict[str, str]) -> Converter:
    """Converts rows of any JSONL: field_map maps question/answer/id (and extra metadata keys) to fields."""
    question_field = field_map.get("question", "question")
    answer_field = field_map.get("answer", "answer")
    id_field = field_map.get("id")
    extra = {key: source for key, source in field_map.items() if key not in _CORE_FIELDS}

    def convert(where: str, row: dict[str, Any]) -> TrainingSample:
        question = required_text(row, question_field)
        answer = row.get(answer_field)
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            row = row | {answer_field: str(answer)}  # a bare numeric answer (e.g. 72) is a fine reference
        reference = parsed_reference(required_text(row, answer_field), answer_field)
        ident = (
            str(row[id_field]) if id_field and row.get(id_field) is not None else question_key(question)[:12]
        )
        missing = [source for source in extra.values() if source not in row]
        if missing:
            raise RowError(f"field {missing[0]!r} (from data.field_map) is missing")
        metadata = {"source": "jsonl"} | {key: row[source] for key, source in extra.items()}
        return TrainingSample(f"jsonl-{ident}", question, reference, metadata)

    return convert


@register_data_provider("jsonl")
def jsonl_provider(config: DataConfig, seed: int) -> ProviderOutput:
    """Any JSONL with a question and a reference answer (`#### N`, `\\boxed{}` or a bare answer)."""
    return split_sources(config, seed, FileSpec("jsonl", jsonl_converter(config.field_map), JSONL_HINT))
