"""`hackable-rl lanes 'condition@*'`: a study's outdated DVC stages as Ray tasks, recorded in dvc.lock.

`dvc repro` runs stages one after another, and two `dvc repro` processes cannot share a repository
(DVC locks it for the whole run). The matrix stages of a study are independent once their upstream
(prepare, warm start, payoff) is up to date, so this runs each matching outdated stage's own `cmd`, as
DVC would (in its folder, console to `cache/logs/lanes/<stage>.log`), as a Ray task
(`scheduling.ray_cells`): on a local Ray instance with this machine's cores, or on the cluster at
`--address`. A named stage that reads another named stage's outputs (a warm start's model, the payoff
table) starts once that one has ended with exit 0, and is not run when it failed, so
`lanes 'warmstart@*' payoff 'base@*' 'condition@*'` runs a whole study in order. Each cell declares its
`torch_threads` param as CPUs (and one GPU where the cluster has
GPUs), so on 2 cores two one-thread cells run side by side. Each stage that exits 0 is committed to
dvc.lock as it ends, through DVC's own API under DVC's repository lock (`Repo.commit`, from the one
driver thread, so two cells finishing together are committed one after the other): dvc.lock ends as
`dvc repro` would leave it, and a later `dvc repro` reruns nothing. `dvc repro warmstart payoff`
brings the upstream up to date first. A stage listed only because a stage it reads was outdated is
checked again when that one has run, and skipped when its inputs came out unchanged (a payoff table
rewritten byte for byte after a new seed joined its params), as `dvc repro` skips it.

Before anything runs, a stage whose command, dependencies and params have run before, in this
project or in another sharing its DVC cache, is checked out from DVC's run cache and committed, as
`dvc repro` does (each commit saves its stage to the run cache): studies whose warm starts have the
same recipe, data and thread count share them, and a fresh clone on a machine that ran the study
reruns nothing it has.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hackable_rl.core.errors import UserError
from hackable_rl.scheduling.ray_cells import CellResult, CellRun, connect, import_ray, run_cells

__all__ = ["outdated_stages", "restore_from_run_cache", "run_lanes", "outcome_line"]

THREADS_PARAM = "torch_threads"


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def outdated_stages(repo, patterns: list[str], log_dir: Path) -> list[CellRun]:
    """The stages named by `patterns` (globs) that `dvc status` lists as changed, and those named that
    depend on one of them (as `dvc repro` would rerun them), in the order DVC lists them, each waiting for the
    named stages it reads (`CellRun.after`); a UserError when a stage they depend on and do not name
    is itself outdated."""
    changed = {key.rsplit(":", 1)[-1] for key in repo.status()}
    graph = repo.index.graph
    stages = [stage for stage in repo.index.stages if stage.name and _matches(stage.name, patterns)]
    if not stages:
        raise UserError(f"lanes: no stage matches {' '.join(patterns)} (see `dvc stage list`)")
    upstream = {dep.name for stage in stages for dep in graph.successors(stage)
                if dep.name and dep.name in changed and not _matches(dep.name, patterns)}
    if upstream:
        raise UserError(f"lanes: run `dvc repro {' '.join(sorted(upstream))}` first (their outputs are outdated)")
    chosen = _with_downstream(graph, stages, {stage.name for stage in stages if stage.name in changed})
    return [_cell(stage, log_dir, tuple(dep.name for dep in graph.successors(stage) if dep.name in chosen))
            for stage in stages if stage.name in chosen]


def _with_downstream(graph, stages: list, chosen: set[str]) -> set[str]:
    """`chosen` and every stage of `stages` that reads, directly or through others of them, one of its
    outputs (DVC's graph points from a stage to the stages it depends on)."""
    chosen = set(chosen)
    grew = True
    while grew:
        grew = False
        for stage in stages:
            if stage.name not in chosen and any(dep.name in chosen for dep in graph.successors(stage)):
                chosen.add(stage.name)
                grew = True
    return chosen


def _cell(stage, log_dir: Path, after: tuple[str, ...]) -> CellRun:
    if not isinstance(stage.cmd, str):
        raise UserError(f"lanes: stage {stage.name} has a list of commands; lanes runs stages with one `cmd`")
    outs = tuple(Path(out.fs_path) for out in stage.outs if not out.persist)
    return CellRun(stage.name, shlex.split(stage.cmd), log_dir / f"{stage.name}.log", Path(stage.wdir),
                   _threads(stage), after, outs)


def _threads(stage) -> float:
    """The CPUs the stage's command uses: its `--set torch_threads=N`, else its `torch_threads` param,
    else 1."""
    # deferred: an optional extra, loaded by the command that uses it
    from dvc.dependency.param import ParamsDependency

    for part in shlex.split(stage.cmd):
        name, _, value = part.partition("=")
        if name == THREADS_PARAM and value.isdigit() and int(value) > 0:
            return int(value)
    for dep in stage.deps:
        if isinstance(dep, ParamsDependency):
            value = dep.read_params().get(THREADS_PARAM)
            if isinstance(value, int) and value > 0:
                return value
    return 1


def run_lanes(
    repo_dir: Path, patterns: list[str], address: str | None, jobs: int | None, retries: int,
    echo: Callable[[str], None] = print,
) -> list[tuple[CellRun, CellResult]]:
    """Runs the outdated matching stages as Ray tasks, commits each that exits 0 as it ends, and
    `echo`es one line per finished stage; returns every stage with its result."""
    if jobs is not None and jobs < 1 or retries < 0:
        raise UserError(f"lanes: --jobs {jobs} --retries {retries}: expected --jobs of 1 or more, --retries of 0 or more")
    ray = import_ray()
    cells = restore_from_run_cache(repo_dir, _outdated(repo_dir, patterns), echo)
    if not cells:
        echo(f"lanes: every stage matching {' '.join(patterns)} is up to date")
        return []
    echo(connect(ray, address))
    if not address:  # a cell asking more threads than this machine has still runs, as under `dvc repro`
        cells = [replace(cell, cpus=min(cell.cpus, os.cpu_count() or 1)) for cell in cells]
    try:
        return _run_and_record(ray, repo_dir, cells, jobs, retries, echo)
    finally:
        ray.shutdown()


def _outdated(repo_dir: Path, patterns: list[str]) -> list[CellRun]:
    # deferred: an optional extra, loaded by the command that uses it
    from dvc.exceptions import NotDvcRepoError
    from dvc.parsing import ResolveError
    from dvc.repo import Repo

    try:
        with Repo(str(repo_dir)) as repo:
            return outdated_stages(repo, patterns, Path(repo.root_dir) / "cache" / "logs" / "lanes")
    except NotDvcRepoError:
        raise UserError(f"lanes: {repo_dir} is not in a DVC project (run it in a study's folder, or pass --project)") from None
    except ResolveError as error:  # dvc.yaml or its vars (a study.yaml key that redefines a params.yaml one)
        raise UserError(f"lanes: {' '.join(str(error).split())}") from None


def restore_from_run_cache(repo_dir: Path, cells: list[CellRun], echo: Callable[[str], None]) -> list[CellRun]:
    """Checks out and commits, in order, each cell whose inputs are ready (it waits for no cell left to
    run) and that DVC's run cache holds: the same command, dependencies and params, run before with
    its outputs in the cache. Returns the cells left to run, no longer waiting for restored ones."""
    # deferred: an optional extra, loaded by the command that uses it
    from dvc.repo import Repo
    from dvc.stage.cache import RunCacheNotFoundError

    restored: set[str] = set()
    left: list[CellRun] = []
    with Repo(str(repo_dir)) as repo:
        for cell in cells:
            target = f"{Path(repo.root_dir) / 'dvc.yaml'}:{cell.name}"
            if any(name not in restored for name in cell.after):
                left.append(cell)
                continue
            try:
                with repo.lock:  # the checkout writes outputs, as `dvc repro` does under its lock
                    repo.stage_cache.restore(repo.stage.collect(target)[0])
            except RunCacheNotFoundError:
                left.append(cell)
                continue
            repo.commit(target, force=True)
            restored.add(cell.name)
            echo(f"{cell.name}: restored from DVC's run cache (the same command, inputs and params ran before)")
    return [replace(cell, after=tuple(name for name in cell.after if name not in restored)) for cell in left]


def _run_and_record(
    ray, repo_dir: Path, cells: list[CellRun], jobs: int | None, retries: int, echo: Callable[[str], None]
) -> list[tuple[CellRun, CellResult]]:
    """The cells through Ray, each committed to dvc.lock the moment it ends (a kill of lanes loses no
    finished cell); a cell whose outputs DVC cannot commit is reported failed, and the others go on."""
    # deferred: an optional extra, loaded by the command that uses it
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    uncommitted: dict[int, CellResult] = {}
    with Repo(str(repo_dir)) as repo:

        def record(index: int, result: CellResult) -> None:
            if result.code == 0:
                try:
                    repo.commit(f"{Path(repo.root_dir) / 'dvc.yaml'}:{cells[index].name}", force=True)
                except DvcException as error:  # e.g. an output the command did not write
                    result = uncommitted[index] = CellResult(-1, f"dvc commit: {error}")
            echo(outcome_line(cells[index], result))

        def needed(index: int) -> bool:  # upstream may have rewritten its outputs byte for byte
            return bool(repo.status(targets=[f"{Path(repo.root_dir) / 'dvc.yaml'}:{cells[index].name}"]))

        results = run_cells(ray, cells, uuid.uuid4().hex, jobs, retries, record, needed)
    return [(cell, uncommitted.get(index, result)) for index, (cell, result) in enumerate(zip(cells, results, strict=True))]


def outcome_line(cell: CellRun, result: CellResult) -> str:
    """`<stage>: ok`, or why it failed and where its log is."""
    if result.skipped:
        return f"{cell.name}: up to date once the stages it reads had run (their outputs did not change)"
    if result.code == 0:
        return f"{cell.name}: ok"
    why = result.error or f"exit {result.code}"
    return f"{cell.name}: FAILED ({why}), log {cell.log}"
