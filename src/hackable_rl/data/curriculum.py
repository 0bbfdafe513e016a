"""Curricula: several sources interleaved into one training stream.

`interleave` reads `data.curriculum.sources` (in curriculum order). Each source gets a share of
`train_size`, `test_size`, `validation_size` and `sft_size` proportional to its weight (largest remainder), is
prepared by its own provider with seed `seed + 7919 * index`, and its rows get ids prefixed `s<index>-`
and `metadata.curriculum_source = "<index>:<provider>"`. The row order of train.jsonl is the
curriculum; a trainer that honours `step`/`epoch` must read it in order (no shuffling):

- `mixed`: every prefix of the stream holds the sources in proportion to their weights.
- `step`: `switch_every` samples from one source, then the next (cycling; exhausted sources drop out).
- `epoch`: each source's rows repeated for `switch_every` passes (reshuffled per pass) before
  the next source starts; the stream is then `train_size * switch_every` rows long.

`gsm8k_math_curriculum` is `interleave` over gsm8k and math sources with the MATH rows ordered
from level 1 to level 5, so the stream moves from grade-school problems to hard competition ones.
"""

from __future__ import annotations

from dataclasses import replace

from hackable_rl.config.experiment import CurriculumConfig, CurriculumSource, DataConfig
from hackable_rl.core.errors import UserError
from hackable_rl.core.registry import DATA_PROVIDERS, register_data_provider
from hackable_rl.data.providers import ProviderOutput
from hackable_rl.data.schema import TrainingSample
from hackable_rl.data.sources import shuffled

_SOURCE_SEED_STRIDE = 7919
_CURRICULUM_PROVIDERS = ("interleave", "gsm8k_math_curriculum")
_EXAMPLE = (
    "e.g. data.curriculum.sources: [{provider: gsm8k, path: data/gsm8k/train.jsonl, weight: 3}, "
    "{provider: math, path: data/math500/test.jsonl, weight: 1}]"
)


def weighted_shares(total: int, weights: list[float]) -> list[int]:
    """Splits `total` in proportion to `weights` (largest remainder; ties go to the earlier source)."""
    exact = [total * weight / sum(weights) for weight in weights]
    shares = [int(value) for value in exact]
    by_remainder = sorted(range(len(weights)), key=lambda index: (shares[index] - exact[index], index))
    for index in by_remainder[: total - sum(shares)]:
        shares[index] += 1
    return shares


def interleave_mixed(streams: list[list[TrainingSample]]) -> list[TrainingSample]:
    """Merges streams so every prefix holds each in proportion to its length (smooth round-robin)."""
    total = sum(len(stream) for stream in streams)
    taken = [0] * len(streams)
    merged = []
    for position in range(1, total + 1):
        # The stream furthest behind its due share goes next.
        deficits = [len(stream) * position / total - taken[index] for index, stream in enumerate(streams)]
        index = max(range(len(streams)), key=lambda i: (taken[i] < len(streams[i]), deficits[i], -i))
        merged.append(streams[index][taken[index]])
        taken[index] += 1
    return merged


def interleave_blocks(streams: list[list[TrainingSample]], block: int) -> list[TrainingSample]:
    """`block` samples from each stream in turn, cycling until all are used."""
    merged, offsets = [], [0] * len(streams)
    while any(offset < len(stream) for offset, stream in zip(offsets, streams, strict=True)):
        for index, stream in enumerate(streams):
            merged.extend(stream[offsets[index] : offsets[index] + block])
            offsets[index] += block
    return merged


def repeat_passes(streams: list[list[TrainingSample]], passes: int, seed: int) -> list[TrainingSample]:
    """Each stream for `passes` passes (reshuffled per pass), one stream after the other."""
    merged = []
    for index, stream in enumerate(streams):
        for number in range(passes):
            merged.extend(
                stream if number == 0 else shuffled(stream, seed, f"curriculum:{index}:pass{number}")
            )
    return merged


def _source_config(config: DataConfig, source: CurriculumSource, sizes: tuple[int, int, int, int]) -> DataConfig:
    train_size, test_size, validation_size, sft_size = sizes
    return config.model_copy(
        update={
            "provider": source.provider,
            "path": source.path,
            "test_path": None,
            "hf_dataset": None,
            "levels": source.levels,
            "train_size": train_size,
            "test_size": test_size,
            "validation_size": validation_size,
            "sft_size": sft_size,
            "curriculum": CurriculumConfig(),
        }
    )


def _tagged(samples: list[TrainingSample], index: int, provider: str) -> list[TrainingSample]:
    label = f"{index}:{provider}"
    return [
        replace(s, id=f"s{index}-{s.id}", metadata=s.metadata | {"curriculum_source": label}) for s in samples
    ]


def _check_sources(config: DataConfig) -> list[CurriculumSource]:
    sources = config.curriculum.sources
    if not sources:
        raise UserError(f"data.curriculum.sources: empty; list the sources in curriculum order, {_EXAMPLE}")
    for index, source in enumerate(sources):
        if source.provider in _CURRICULUM_PROVIDERS:
            raise UserError(
                f"data.curriculum.sources.{index}.provider: {source.provider!r} cannot nest a curriculum"
            )
        if source.provider != "arith" and not source.path:
            raise UserError(
                f"data.curriculum.sources.{index}.path: required for provider {source.provider!r}"
            )
    if sum(source.weight for source in sources) <= 0:
        raise UserError(
            "data.curriculum.sources: every weight is 0; give at least one source a positive weight"
        )
    if config.train_size is None or config.test_size is None:
        raise UserError(
            "data.train_size / data.test_size: a curriculum splits them between sources; give numbers"
        )
    return sources


def build_curriculum(config: DataConfig, seed: int, order_math_by_level: bool = False) -> ProviderOutput:
    """Prepares every source with its share, then merges the training streams by the schedule."""
    sources = _check_sources(config)
    weights = [source.weight for source in sources]
    shares = zip(
        weighted_shares(config.train_size, weights),
        weighted_shares(config.test_size, weights),
        weighted_shares(config.validation_size, weights),
        weighted_shares(config.sft_size, weights),
        strict=True,
    )
    trains, tests, validations, sfts, manifests, skipped = [], [], [], [], [], []
    for index, (source, sizes) in enumerate(zip(sources, shares, strict=True)):
        provider = DATA_PROVIDERS.get(source.provider)
        output = provider(_source_config(config, source, sizes), seed + _SOURCE_SEED_STRIDE * index)
        train = output.train
        if order_math_by_level and source.provider == "math":
            train = sorted(train, key=lambda sample: sample.metadata["level"])  # stable: easy to hard
        trains.append(_tagged(train, index, source.provider))
        tests.extend(_tagged(output.test, index, source.provider))
        validations.extend(_tagged(output.validation, index, source.provider))
        sfts.append(_tagged(output.sft, index, source.provider))
        manifests.extend(
            entry | {"curriculum_source": f"{index}:{source.provider}"} for entry in output.sources
        )
        skipped.extend(output.skipped)
    return ProviderOutput(
        _schedule(trains, config.curriculum, seed), tests, validations, interleave_mixed(sfts), manifests, skipped
    )


def _schedule(
    streams: list[list[TrainingSample]], curriculum: CurriculumConfig, seed: int
) -> list[TrainingSample]:
    if curriculum.schedule == "mixed":
        return interleave_mixed(streams)
    if curriculum.schedule == "step":
        return interleave_blocks(streams, curriculum.switch_every)
    return repeat_passes(streams, curriculum.switch_every, seed)


@register_data_provider("interleave")
def interleave_provider(config: DataConfig, seed: int) -> ProviderOutput:
    """Any sources (gsm8k, math, arith, jsonl) interleaved by weight and schedule."""
    return build_curriculum(config, seed)


@register_data_provider("gsm8k_math_curriculum")
def gsm8k_math_curriculum_provider(config: DataConfig, seed: int) -> ProviderOutput:
    """GSM8K and MATH sources, MATH ordered from level 1 to 5 within its share of the stream."""
    for index, source in enumerate(config.curriculum.sources):
        if source.provider not in ("gsm8k", "math"):
            raise UserError(
                f"data.curriculum.sources.{index}.provider: {source.provider!r}; gsm8k_math_curriculum "
                "takes gsm8k and math sources (use provider: interleave for others)"
            )
    return build_curriculum(config, seed, order_math_by_level=True)
