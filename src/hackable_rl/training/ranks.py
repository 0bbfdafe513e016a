"""Several training processes (`accelerate launch --num_processes N ... hackable-rl train`): who does what.

Every process loads the policy, generates for its share of each step's prompts and scores its own
completions; TRL gathers the rewards and DDP averages the gradients. The run itself exists once:

    main process (rank 0)   opens (or rewinds) the run folder, starts the MLflow run, writes every
                            generation record, metrics.jsonl and run.json, saves the permanent
                            checkpoints and logs them to MLflow
    other processes         train; their generation records are gathered to the main process at
                            each reward call (`Ranks.gather`), so each completion is written once

With one process (the default) nothing here starts a process group and every call is a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.processes import die_with_parent

__all__ = ["Ranks", "process_ranks", "launched_world_size"]


def launched_world_size() -> int:
    """The process count a launcher (accelerate, torchrun) set in the environment; 1 without one."""
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def several(self) -> bool:
        return self.world_size > 1

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's `items`, concatenated in rank order, on the main process; [] elsewhere. A
        collective: every process calls it at the same point (each reward call)."""
        if not self.several:
            return items
        # deferred: torch and transformers load only where a model runs (start-up cost)
        import torch.distributed as dist

        everyone: list[list[Any] | None] = [None] * self.world_size
        dist.all_gather_object(everyone, items)
        return [item for part in everyone for item in (part or [])] if self.is_main else []

    def share(self, value: Any) -> Any:
        """The main process's `value` on every process (what the others pass is ignored)."""
        if not self.several:
            return value
        # deferred: torch and transformers load only where a model runs (start-up cost)
        import torch.distributed as dist

        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def process_ranks(config: Any) -> Ranks:
    """This process's rank, once the process group is up (gloo on CPU, NCCL on GPUs, as accelerate
    chooses); refuses a config whose `trainer.world_size` is not the launched process count, or whose
    groups of completions would straddle two processes."""
    world_size = launched_world_size()
    trainer = config.trainer
    if trainer.world_size != world_size:
        raise UserError(f"trainer.world_size is {trainer.world_size} but {world_size} process(es) were launched; "
                        f"pass --set trainer.world_size={world_size} (it enters the effective batch)")
    if world_size == 1:
        return Ranks(0, 1)
    if trainer.per_device_train_batch_size % trainer.num_generations:
        raise UserError(f"trainer.per_device_train_batch_size ({trainer.per_device_train_batch_size}) must be a multiple "
                        f"of trainer.num_generations ({trainer.num_generations}) with several processes, so that each "
                        "group of completions is scored on one process (its group statistics are local)")
    if config.alarm.stop_training:
        raise UserError("alarm.stop_training works in one process only: the other processes would not stop with it")
    die_with_parent()  # torchrun starts workers in their own session: a killed launcher takes them along
    # deferred: torch and transformers load only where a model runs (start-up cost)
    import torch
    from accelerate import PartialState

    # Starts the process group that the Trainer then reuses. Without a GPU, accelerate sees each
    # torchrun process as alone unless told it is on CPU: then it joins them over gloo.
    state = PartialState(cpu=not torch.cuda.is_available())
    return Ranks(state.process_index, state.num_processes)


