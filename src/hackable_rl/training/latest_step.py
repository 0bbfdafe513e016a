"""The generation records of the latest training step, in memory: where `hackable_rl.trl_parts`'s reward
keeps them for the callbacks and for `VerifierReward.last_step_records()` (the CLI's recorder writes them
to the run folder instead, `training.recorder`)."""

from __future__ import annotations

from hackable_rl.reward.records import GenerationRecord
from hackable_rl.training.ranks import Ranks


class LatestStep:
    """A record sink (`reward.pipeline.RecordSink`): each reward call's records, stamped with the step TRL
    is computing (`begin`); the first call of a new step, or any call outside a trainer, replaces them.
    Only the latest step is kept."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.records: list[GenerationRecord] = []
        self._computing: int | None = None

    def begin(self, step: int | None) -> None:
        self._computing = step

    def add(self, records: list[GenerationRecord]) -> None:
        step, gathered = self._computing, gathered_on_main(records)
        stamped = gathered if step is None else [record.at_step(step) for record in gathered]
        if step is None or step != self.step:
            self.step, self.records = step, stamped
        else:
            self.records.extend(stamped)


def gathered_on_main(records: list[GenerationRecord]) -> list[GenerationRecord]:
    """Under several processes (`accelerate launch`), every process's records on the main one and none
    elsewhere (`Ranks.gather`, as `hackable-rl train` gathers them), so the callbacks there see the whole
    step; with one process, `records`."""
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return records
    return Ranks(dist.get_rank(), dist.get_world_size()).gather(records)
