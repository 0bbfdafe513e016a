"""A study's cells as Ray tasks: one task per DVC stage command, local or on a cluster.

    driver (hackable-rl lanes)                       worker (any node of the Ray cluster)
    connect: a local Ray on 127.0.0.1, or --address   run_cell: <cell>.pid <- "<token> <worker pid>"
    submit each cell once the cells it waits for        the stage's command, in its folder, console
      ended ok, its resources declared                  to <cell>.log; exit code back to the driver
    ray.wait: each finished cell -> on_finish

Ray retries a task whose worker or node died (`max_retries`), never one that raised (`retry_exceptions`
off) or exited non-zero: a deterministic failure fails once. A retry finds its own token in the cell's
PID file, so it knows an earlier attempt was killed: it appends to the same log and sets
HACKABLE_RL_RESUME=auto, which makes `hackable-rl condition` continue the cell's training run from its
last checkpoint (each step exactly once). The command dies with the worker that started it
(PR_SET_PDEATHSIG), so a killed worker leaves no process training on beside its retry.

Ray is imported here only: the default install does not need it (`pip install 'hackable-rl[ray]'`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.core.processes import die_with_parent

RESUME_ENV = "HACKABLE_RL_RESUME"
"""Read by `hackable-rl condition --resume`: set to `auto` in a retried cell's environment."""


@dataclass(frozen=True)
class CellRun:
    """One DVC stage's command as a Ray task runs it."""

    name: str
    """The stage's name within its dvc.yaml (`condition@any_box-baseline-0.5-0`)."""
    command: list[str]
    """The stage's `cmd`, split as a shell would (run without a shell, so it dies with its worker)."""
    log: Path
    """The command's console; a retry appends to it."""
    cwd: Path
    """The stage's folder: it must be at the same path on every node (a shared file system)."""
    cpus: float = 1
    """CPUs the task declares to Ray: the stage's `torch_threads`."""
    after: tuple[str, ...] = ()
    """Names of the cells of the same run whose outputs this one reads: it starts once they have ended
    with exit 0, and does not run when one of them failed."""
    outs: tuple[Path, ...] = ()
    """The stage's outputs that DVC removes before it runs the command (all but `persist: true` ones):
    removed here too, so a folder output holds only what this run wrote."""

    @property
    def pid_file(self) -> Path:
        """`<token> <pid>` of the worker running the cell (what a test or an operator kills)."""
        return self.log.with_suffix(".pid")


@dataclass(frozen=True)
class CellResult:
    code: int
    """The command's exit code; -1 when it never ran to an exit (the error says why)."""
    error: str | None = None
    """Why the task failed without an exit code (its worker died past every retry, the command was not found)."""
    skipped: bool = False
    """Not run: once what it waited for had run, its own inputs were as they were (`run_cells`' `needed`)."""


# --------------------------------------------------------------------------- on a worker


def run_cell(cell: CellRun, token: str) -> int:
    """Runs one cell's command on this worker and returns its exit code (the body of the Ray task)."""
    retried = _earlier_attempt(cell.pid_file, token)
    cell.log.parent.mkdir(parents=True, exist_ok=True)
    cell.pid_file.write_text(f"{token} {os.getpid()}\n", encoding="utf-8")
    if not retried:  # as `dvc repro` does: nothing of an earlier run of the stage stays among its outputs
        _remove_outs(cell.outs)
    env = os.environ | ({RESUME_ENV: "auto"} if retried else {})
    with cell.log.open("a" if retried else "w", encoding="utf-8") as log:  # a retry keeps the killed attempt's log
        if retried:
            log.write(f"\n--- {cell.name}: retried after its worker died; {RESUME_ENV}=auto (resume from the last checkpoint)\n")
            log.flush()
        process = subprocess.Popen(cell.command, cwd=cell.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=die_with_parent)  # a killed worker takes its command along
        return process.wait()


def _remove_outs(outs: tuple[Path, ...]) -> None:
    for out in outs:
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()


def _earlier_attempt(pid_file: Path, token: str) -> bool:
    """Whether an attempt of this cell in this same `lanes` run already started (and so was killed)."""
    try:
        return pid_file.read_text(encoding="utf-8").split()[0] == token
    except (OSError, IndexError):
        return False




# --------------------------------------------------------------------------- on the driver


def import_ray() -> Any:
    try:
        # deferred: an optional extra, loaded by the command that uses it
        import ray
    except ImportError:
        raise UserError("lanes runs cells on Ray, which is not installed: pip install 'hackable-rl[ray]'") from None
    return ray


def connect(ray: Any, address: str | None) -> str:
    """Joins the cluster at `address`, or starts a local Ray on 127.0.0.1 with this machine's cores;
    returns a line saying which, with the dashboard's address."""
    if address:
        _check_answers(address)
    try:
        if address:
            context = ray.init(address=address, log_to_driver=False)
        else:
            context = ray.init(address="local", num_cpus=os.cpu_count() or 1, include_dashboard=True,
                               dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1", log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as error:
        raise UserError(f"lanes --address {address}: no Ray cluster there ({error}; a cluster with token "
                        "authentication, `ray start`'s default, also needs RAY_AUTH_MODE=token and its token)") from None
    where = f"the Ray cluster at {address}" if address else "a local Ray instance"
    dashboard = f"; dashboard http://{context.dashboard_url}" if context.dashboard_url else ""
    return f"lanes: {where}, {ray.cluster_resources().get('CPU', 0):g} CPUs, {ray.cluster_resources().get('GPU', 0):g} GPUs{dashboard}"


def _check_answers(address: str) -> None:
    """A `host:port` where nothing listens is one line at once (Ray itself retries for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # `auto` and other forms Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as error:
        raise UserError(f"lanes --address {address}: no Ray cluster answers there ({error.strerror or error})") from None


def run_cells(
    ray: Any, cells: Sequence[CellRun], token: str, jobs: int | None, retries: int,
    on_finish: Callable[[int, CellResult], None], needed: Callable[[int], bool] | None = None,
) -> list[CellResult]:
    """Runs every cell as a Ray task and calls `on_finish(index, result)` as each one ends (one at a
    time, on this thread: the dvc.lock commits never overlap); returns the results in `cells` order.

    A cell is submitted once every cell it waits for (`after`) has ended with exit 0; when one of them
    failed it is not run, and its result says which. A cell declares `cpus` CPUs, and one GPU where the
    cluster has GPUs: Ray runs as many at once as the resources allow (at most `jobs`, when given). It
    is retried `retries` times when its worker or node dies. A cell that waited for others and that
    `needed(index)` finds up to date once they ended (they rewrote the same outputs) is not run: its
    result is exit 0, `skipped`."""
    gpus = 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0
    task = ray.remote(run_cell)
    index_of = {cell.name: index for index, cell in enumerate(cells)}
    waiting, running = list(range(len(cells))), {}
    results: list[CellResult | None] = [None] * len(cells)
    while waiting or running:
        for index in list(waiting):
            state = _upstream_state(cells[index], index_of, results)
            if state == _WAIT or (state == _READY and len(running) >= (jobs or len(cells))):
                continue
            waiting.remove(index)
            if state == _READY and cells[index].after and needed is not None and not needed(index):
                results[index] = CellResult(0, skipped=True)
                on_finish(index, results[index])
            elif state == _READY:
                cell = cells[index]
                options = {"name": cell.name, "num_cpus": cell.cpus, "num_gpus": gpus, "max_retries": retries,
                           "retry_exceptions": False}
                running[task.options(**options).remote(cell, token)] = index
            else:  # `state` names the failed cell it waited for
                results[index] = CellResult(-1, f"not run: {state} failed")
                on_finish(index, results[index])
        if not running:
            continue  # cells marked not run above may unblock (fail) others waiting on them
        done, _ = ray.wait(list(running), num_returns=1)
        index = running.pop(done[0])
        results[index] = _result(ray, done[0])
        on_finish(index, results[index])
    return [result for result in results if result is not None]


_READY, _WAIT = "", None


def _upstream_state(cell: CellRun, index_of: dict[str, int], results: list[CellResult | None]) -> str | None:
    """_READY when every cell `cell` waits for ended with exit 0, _WAIT while one has not ended, else
    the name of one that failed. Names outside this run (already up to date) are not waited for."""
    ended = [(name, results[index_of[name]]) for name in cell.after if name in index_of]
    failed = [name for name, result in ended if result is not None and result.code != 0]
    if failed:
        return failed[0]
    return _WAIT if any(result is None for _, result in ended) else _READY


def _result(ray: Any, ref: Any) -> CellResult:
    try:
        return CellResult(ray.get(ref))
    except ray.exceptions.RayError as error:  # the worker died past its retries, or the command could not start
        return CellResult(-1, str(error).strip().splitlines()[-1])
