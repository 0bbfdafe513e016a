"""The prepare stage: run the configured provider, check the splits, write them with a manifest.

Outputs under `<cache>/datasets/<data.name>/`:
- `train.jsonl` (GRPO prompts), `validation.jsonl` (everything tuned or checked during development),
  `test.jsonl` (reported numbers only) and, when the provider has worked solutions and
  `data.sft_size > 0`, `sft.jsonl` (warm-start data). Each row is `TrainingSample.to_row()` plus `prompt`.
- `manifest.json`: sources (path + sha256, or hub id + revision), filters, seed, counts, bad rows
  skipped, the disjointness check, and the sha256 of every output.

Splits are disjoint by a hash of the normalised question; an overlap is an error. Where problems
carry their computation chain (arith: operands and operators in order), test shares no chain with
any other split; an overlap is an error too (`check_test_chains`). Nothing here
reads a clock or an unseeded random source, so the same config gives the same bytes.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import read_jsonl, write_json, write_jsonl
from hackable_rl.core.registry import DATA_PROVIDERS
from hackable_rl.core.storage import Storage, file_sha256
from hackable_rl.data.arith import arith_settings, chain_key
from hackable_rl.data.prompting import PROMPT_PREFIX, render_prompt
from hackable_rl.data.providers import ProviderOutput, question_key
from hackable_rl.data.schema import TrainingSample

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test", "sft")
# Metadata keys whose value counts the manifest reports per split (curricula proportions, MATH levels).
_BREAKDOWN_KEYS = ("source", "curriculum_source", "level", "subject", "n_steps", "hedged", "truncated")
_LISTED_OVERLAPS = 5


@dataclass(frozen=True)
class PrepareResult:
    """Where the prepared dataset went and what it holds."""

    out_dir: Path
    counts: dict[str, int]
    """Rows per written split (`sft` only when written)."""
    skipped_rows: int
    manifest_path: Path


def prepare_dataset(config: ExperimentConfig) -> PrepareResult:
    """Runs `data.provider`, checks disjointness, writes the splits and manifest.json."""
    out_dir = Storage.of(config.storage).dataset_dir(config.data.name)
    provider = DATA_PROVIDERS.get(config.data.provider)
    with Console(stderr=True).status(f"preparing {config.data.name} with provider {config.data.provider}"):
        output = provider(config.data, config.seed)
    splits = {"train": output.train, "validation": output.validation, "test": output.test, "sft": output.sft}
    _check_not_empty(splits, config)
    check_unique_ids(splits)
    overlaps = check_disjoint(splits) | check_test_chains(splits)
    files = _write_splits(out_dir, splits)
    manifest = build_manifest(config, output, splits, overlaps, files)
    manifest_path = out_dir / "manifest.json"
    write_json(manifest_path, manifest)
    counts = {split: entry["rows"] for split, entry in files.items()}
    log.info("prepared %s in %s: %s", config.data.name, out_dir, counts)
    return PrepareResult(out_dir, counts, len(output.skipped), manifest_path)


def _check_not_empty(splits: dict[str, list[TrainingSample]], config: ExperimentConfig) -> None:
    for split in ("train", "test"):
        if not splits[split]:
            raise UserError(
                f"data: provider {config.data.provider!r} produced no {split} problems; check data.path, "
                "data.test_path, the filters (levels, subjects) and the sizes (test, validation and sft "
                "are taken first)"
            )


def check_unique_ids(splits: dict[str, list[TrainingSample]]) -> None:
    """Refuses one id given to two different problems (in any splits): every record, pass@k and paired
    comparison keys prompts by id, so the two would be merged into one prompt."""
    seen: dict[str, tuple[str, str]] = {}
    for split, samples in splits.items():
        for sample in samples:
            key = question_key(sample.question)
            first = seen.setdefault(sample.id, (split, key))
            if first[1] != key:
                raise UserError(
                    f"data: id {sample.id!r} names two different problems (in {first[0]} and {split}); ids key "
                    "every record and pass@k, so they must be unique (fix the source's ids or data.field_map.id)"
                )


def check_disjoint(splits: dict[str, list[TrainingSample]]) -> dict[str, int]:
    """Counts shared normalised questions per pair of splits; any overlap is a UserError naming ids."""
    keys = {split: {question_key(s.question): s.id for s in samples} for split, samples in splits.items()}
    overlaps, problems = {}, []
    names = list(splits)
    for position, first in enumerate(names):
        for second in names[position + 1 :]:
            shared = sorted(set(keys[first]) & set(keys[second]), key=lambda key: keys[first][key])
            overlaps[f"{first}/{second}"] = len(shared)
            if shared:
                pairs = ", ".join(
                    f"{keys[first][key]} = {keys[second][key]}" for key in shared[:_LISTED_OVERLAPS]
                )
                problems.append(f"data: {len(shared)} {first} problems also appear in {second} ({pairs})")
    if problems:
        raise UserError(
            *problems, "data: splits must be disjoint; remove the duplicates or split the source anew"
        )
    return overlaps


def computation_chain(sample: TrainingSample) -> str | None:
    """`12+7-5` for a problem whose metadata records its operands and operators, else None."""
    operands, operators = sample.metadata.get("operands"), sample.metadata.get("operators")
    if not operands or operators is None:
        return None
    return chain_key(operands, operators)


def check_test_chains(splits: dict[str, list[TrainingSample]]) -> dict[str, int]:
    """Counts test problems whose computation chain appears in another split; any is a UserError.

    Splits without chain metadata (GSM8K, MATH) count 0: there the question key is the only rule."""
    test_chains = {chain: s.id for s in splits["test"] if (chain := computation_chain(s)) is not None}
    counts, problems = {}, []
    for split, samples in splits.items():
        if split == "test":
            continue
        shared = sorted({chain for s in samples if (chain := computation_chain(s)) in test_chains})
        counts[f"test/{split} chains"] = len(shared)
        if shared:
            listed = ", ".join(f"{test_chains[chain]} ({chain})" for chain in shared[:_LISTED_OVERLAPS])
            problems.append(f"data: {len(shared)} test computation chains also appear in {split} ({listed})")
    if problems:
        raise UserError(*problems, "data: test must ask for arithmetic no other split demonstrates or trains")
    return counts


def prepared_row(sample: TrainingSample) -> dict[str, Any]:
    """The JSONL row of one sample: the schema fields plus the rendered prompt (never the reference)."""
    return sample.to_row() | {"prompt": render_prompt(sample.question)}


def _write_splits(out_dir: Path, splits: dict[str, list[TrainingSample]]) -> dict[str, dict[str, Any]]:
    """Writes each split; returns file name, rows and sha256 per written split."""
    files = {}
    for split, samples in splits.items():
        path = out_dir / f"{split}.jsonl"
        if split == "sft" and not samples:
            path.unlink(missing_ok=True)  # a stale sft.jsonl from another config must not be read
            continue
        write_jsonl(path, (prepared_row(sample) for sample in samples))
        files[split] = {"file": path.name, "rows": len(samples), "sha256": file_sha256(path)}
    return files


def _breakdown(samples: list[TrainingSample]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {}
    for sample in samples:
        for key in _BREAKDOWN_KEYS:
            if key in sample.metadata:
                counts.setdefault(key, Counter())[str(sample.metadata[key])] += 1
    return {key: dict(sorted(counter.items())) for key, counter in counts.items()}


def build_manifest(
    config: ExperimentConfig,
    output: ProviderOutput,
    splits: dict[str, list[TrainingSample]],
    overlaps: dict[str, int],
    files: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    data = config.data
    settings = data.model_dump(mode="json", exclude={"name", "provider", "path", "test_path"})
    # Only the sections the provider reads: an unused arith or curriculum block is noise in the record.
    curriculum_providers = {source.provider for source in data.curriculum.sources}
    if data.provider != "arith" and "arith" not in curriculum_providers:
        settings.pop("arith")
    else:
        settings["arith"] = arith_settings(data.arith)
    if data.provider not in ("interleave", "gsm8k_math_curriculum"):
        settings.pop("curriculum")
    return {
        "name": data.name,
        "provider": data.provider,
        "seed": config.seed,
        "settings": settings,
        "sources": output.sources,
        "prompt_prefix": PROMPT_PREFIX,
        "counts": {split: len(samples) for split, samples in splits.items()},
        "breakdown": {split: _breakdown(samples) for split, samples in splits.items()},
        "skipped_rows": len(output.skipped),
        "skipped_examples": output.skipped[:20],
        "disjointness": {
            "key": "sha256 of the NFKC-casefolded, whitespace-collapsed question; test vs every other "
            "split also by computation chain (operands and operators in order) where problems record it",
            "overlaps": overlaps,
        },
        "outputs": files,
    }


def read_prepared(config: ExperimentConfig, split: str) -> list[dict[str, Any]]:
    """Rows of one prepared split (`train`, `validation`, `test` or `sft`); a missing one says to run prepare."""
    if split not in SPLITS:
        raise UserError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    path = Storage.of(config.storage).dataset_dir(config.data.name) / f"{split}.jsonl"
    if not path.exists():
        why = ""
        if split == "sft":
            why = " (sft.jsonl is written only by providers with worked solutions and data.sft_size > 0)"
        raise UserError(f"{path}: not prepared; run `hackable-rl prepare` with the same config first{why}")
    return read_jsonl(path)


def load_split(config: ExperimentConfig, split: str) -> list[TrainingSample]:
    """`read_prepared` as samples (the `prompt` column is re-rendered from the question on demand)."""
    return [TrainingSample.from_row(row) for row in read_prepared(config, split)]
