"""`hackable-rl lanes 'condition@*'`: a study's outdated DVC stages, two at a time, recorded in dvc.lock.

`dvc repro` runs stages one after another, and two `dvc repro` processes cannot share a repository
(DVC locks it for the whole run). On a 2-core machine two one-thread conditions side by side finish
about 1.5x sooner than one after another (docs/results.md), so this runs each matching stage's own
`cmd`, as DVC would (in its folder, console to `cache/logs/lanes/<stage>.log`), `--jobs` at a time,
and `dvc commit`s each stage that exits 0 as it ends: dvc.lock ends as `dvc repro` would leave it, and a
later `dvc repro` reruns nothing. The stages' upstream (prepare, warm start, payoff) must be up to
date first: `dvc repro warmstart payoff` does that. A stage's own thread count is its
`torch_threads` param; the study files set 1.
"""

from __future__ import annotations

import fnmatch
import shlex
from dataclasses import dataclass
from pathlib import Path

from hackable_rl.core.errors import UserError
from hackable_rl.experiments.seeds import run_side_by_side

__all__ = ["StageRun", "outdated_stages", "run_lanes"]


@dataclass(frozen=True)
class StageRun:
    name: str
    """The stage's name within its dvc.yaml (`condition@any_box-baseline-0.5-0`)."""
    command: list[str]
    log: Path
    cwd: Path


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def outdated_stages(repo, patterns: list[str], log_dir: Path) -> list[StageRun]:
    """The stages named by `patterns` (globs) that `dvc status` lists as changed, in dvc.yaml order;
    a UserError when a stage they depend on (and do not name) is itself outdated."""
    changed = {key.rsplit(":", 1)[-1] for key in repo.status()}
    stages = [stage for stage in repo.index.stages if stage.name and _matches(stage.name, patterns)]
    if not stages:
        raise UserError(f"lanes: no stage matches {' '.join(patterns)} (see `dvc stage list`)")
    upstream = {dep.name for stage in stages for dep in repo.index.graph.successors(stage)
                if dep.name and dep.name in changed and not _matches(dep.name, patterns)}
    if upstream:
        raise UserError(f"lanes: run `dvc repro {' '.join(sorted(upstream))}` first (their outputs are outdated)")
    return [StageRun(stage.name, shlex.split(stage.cmd), log_dir / f"{stage.name}.log", Path(stage.wdir))
            for stage in stages if stage.name in changed]


def run_lanes(repo_dir: Path, patterns: list[str], jobs: int) -> list[tuple[StageRun, int]]:
    """Runs the outdated matching stages `jobs` at a time and commits each that succeeded; returns
    every stage with its exit code."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        with Repo(str(repo_dir)) as repo:
            runs = outdated_stages(repo, patterns, Path(repo.root_dir) / "cache" / "logs" / "lanes")
    except NotDvcRepoError:
        raise UserError(f"lanes: {repo_dir} is not in a DVC project (run it in a study's folder, or pass --project)") from None
    with Repo(str(repo_dir)) as repo:

        def record(index: int, code: int) -> None:  # at once: a kill of lanes loses no finished stage
            if code == 0:
                repo.commit(f"{Path(repo.root_dir) / 'dvc.yaml'}:{runs[index].name}", force=True)

        codes = run_side_by_side(runs, jobs, on_finish=record)
    return list(zip(runs, codes, strict=True))
