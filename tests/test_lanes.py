"""`hackable-rl lanes` without Ray: which outdated DVC stages it hands to Ray and what each declares,
how a cell knows it is a retry, and one line for a missing extra or a dead address
(tests/test_lanes_ray.py runs cells on Ray, slow)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hackable_rl.core.errors import UserError
from hackable_rl.scheduling.lanes import outcome_line
from hackable_rl.scheduling.ray_cells import (
    CellResult,
    CellRun,
    _check_answers,
    _earlier_attempt,
    import_ray,
    run_cells,
)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_lanes_picks_the_outdated_cells_with_their_threads_once_upstream_is_done(tmp_path: Path, monkeypatch) -> None:
    """Which stages `lanes` hands to Ray, and what each declares (tests/test_lanes_ray.py runs them)."""
    from dvc.repo import Repo

    from hackable_rl.scheduling.lanes import outdated_stages

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    Repo.init(str(tmp_path))
    (tmp_path / "params.yaml").write_text("torch_threads: 2\n")
    stages = {
        "first": {"cmd": "python -c \"open('a.txt', 'w').write('a')\"", "outs": ["a.txt"]},
        "cell": {"matrix": {"n": [1, 2]}, "deps": ["a.txt"], "outs": ["c${item.n}.txt"], "params": ["torch_threads"],
                 "cmd": "python -c \"open('c${item.n}.txt', 'w').write(open('a.txt').read())\""},
        "wide": {"deps": ["a.txt"], "outs": ["w.txt"], "params": ["torch_threads"],
                 "cmd": "python -c \"open('w.txt', 'w')\" --set torch_threads=3"},
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    with Repo(str(tmp_path)) as repo:
        with pytest.raises(UserError, match="run `dvc repro first` first"):
            outdated_stages(repo, ["cell@*"], logs)
        with pytest.raises(UserError, match="no stage matches nope@"):
            outdated_stages(repo, ["nope@*"], logs)
        named_with_upstream = outdated_stages(repo, ["first", "cell@*"], logs)
        assert sorted((c.name, c.after) for c in named_with_upstream) == [
            ("cell@1", ("first",)), ("cell@2", ("first",)), ("first", ())]  # each cell waits for `first`
        repo.reproduce("first")
        cells = outdated_stages(repo, ["cell@*", "wide"], logs)
    assert all(c.after == () for c in cells)  # `first` is up to date: nothing to wait for
    assert [(c.name, c.cpus, c.log, c.command[:2]) for c in cells] == [
        ("cell@1", 2, logs / "cell@1.log", ["python", "-c"]), ("cell@2", 2, logs / "cell@2.log", ["python", "-c"]),
        ("wide", 3, logs / "wide.log", ["python", "-c"])]  # the command's own --set torch_threads wins


def test_lanes_without_ray_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the `ray` extra were not installed
    with pytest.raises(UserError, match=r"pip install 'hackable-rl\[ray\]'"):
        import_ray()


def test_a_cell_knows_it_is_a_retry_only_from_its_own_lanes_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "cell.pid"
    assert not _earlier_attempt(pid_file, "run-a")  # the first attempt: no file yet
    pid_file.write_text("run-a 1234\n")
    assert _earlier_attempt(pid_file, "run-a")  # its worker died: the retry resumes
    assert not _earlier_attempt(pid_file, "run-b")  # a later lanes run starts the cell afresh
    pid_file.write_text("")
    assert not _earlier_attempt(pid_file, "run-a")


def test_an_address_where_nothing_listens_is_one_line_at_once() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UserError, match=f"lanes --address 127.0.0.1:{port}: no Ray cluster answers there"):
        _check_answers(f"127.0.0.1:{port}")


class _InlineRay:
    """Just enough of Ray for `run_cells`: a task "runs" when submitted, exiting with its cell's code
    from `codes`; the order of submission is kept."""

    class exceptions:
        RayError = RuntimeError

    def __init__(self, codes: dict[str, int]) -> None:
        self.codes, self.submitted = codes, []

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def remote(self, function):
        ray = self

        class Task:
            def options(self, **options):
                return self

            def remote(self, cell: CellRun, token: str):
                ray.submitted.append(cell.name)
                return (cell.name, ray.codes[cell.name])

        return Task()

    def wait(self, refs: list, num_returns: int):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref[1]


def test_a_cell_waits_for_the_cells_it_reads_and_is_not_run_when_one_failed(tmp_path: Path) -> None:
    def cell(name: str, *after: str) -> CellRun:
        return CellRun(name, ["true"], tmp_path / f"{name}.log", tmp_path, 1, after)

    cells = [cell("model@0"), cell("model@1"), cell("payoff", "model@0"), cell("condition@0", "model@0", "payoff"),
             cell("condition@1", "model@1", "payoff")]
    ray = _InlineRay({"model@0": 0, "model@1": 3, "payoff": 0, "condition@0": 0, "condition@1": 0})
    finished: list[str] = []
    results = run_cells(ray, cells, "token", jobs=2, retries=0, on_finish=lambda i, r: finished.append(cells[i].name))
    assert ray.submitted == ["model@0", "model@1", "payoff", "condition@0"]  # never before what it reads
    assert results == [CellResult(0), CellResult(3), CellResult(0), CellResult(0),
                       CellResult(-1, "not run: model@1 failed")]
    assert sorted(finished) == sorted(c.name for c in cells)  # every cell reported once, the skipped one too


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_stage_that_ran_in_another_project_sharing_the_cache_is_restored_not_rerun(tmp_path: Path, monkeypatch) -> None:
    """Two studies with the same warm-start recipe: the second checks its warm start out of DVC's run
    cache (same command, inputs and params) and commits it; a stage with other params still runs."""
    from dvc.repo import Repo

    from hackable_rl.scheduling.lanes import outdated_stages, restore_from_run_cache

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    stages = {
        "model": {"cmd": "python -c \"import uuid; open('m.txt', 'w').write(open('in.txt').read() + uuid.uuid4().hex)\"",
                  "deps": ["in.txt"], "params": ["recipe"], "outs": ["m.txt"]},
        "cell": {"cmd": "python -c \"open('c.txt', 'w').write(open('m.txt').read())\"",
                 "deps": ["m.txt"], "params": ["cell"], "outs": ["c.txt"]},
    }
    for study, cell in (("first", 1), ("second", 2)):
        folder = tmp_path / study
        folder.mkdir()
        Repo.init(str(folder), subdir=True)
        (folder / ".dvc" / "config").write_text(f"[cache]\n    dir = {tmp_path / 'shared-cache'}\n")  # as studies share the root's
        (folder / "in.txt").write_text("the same data\n")
        (folder / "params.yaml").write_text(f"recipe: 3\ncell: {cell}\n")
        (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    monkeypatch.chdir(tmp_path / "first")  # DVC runs a study from its folder, as lanes does
    with Repo(".") as repo:
        repo.reproduce("cell")
    second = tmp_path / "second"
    monkeypatch.chdir(second)
    with Repo(str(second)) as repo:
        cells = outdated_stages(repo, ["model", "cell"], second / "logs")
    said: list[str] = []
    left = restore_from_run_cache(second, cells, said.append)
    assert (second / "m.txt").read_text() == (tmp_path / "first" / "m.txt").read_text()  # checked out, not rerun
    assert [(c.name, c.after) for c in left] == [("cell", ())]  # other params: it runs, no longer waiting
    assert said == ["model: restored from DVC's run cache (the same command, inputs and params ran before)"]
    with Repo(str(second)) as repo:
        assert "model" in yaml.safe_load((second / "dvc.lock").read_text())["stages"]
        assert not any(key.endswith("model") for key in repo.status())


def test_a_study_file_that_redefines_a_params_key_is_one_line(tmp_path: Path) -> None:
    """DVC reads study.yaml as `vars` beside params.yaml: a key in both is DVC's parse error, told in one line."""
    from dvc.repo import Repo

    from hackable_rl.scheduling.lanes import _outdated

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    Repo.init(str(tmp_path))
    (tmp_path / "params.yaml").write_text("report: {out_dir: reports}\n")
    (tmp_path / "study.yaml").write_text("report: real_model\n")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"vars": ["study.yaml"], "stages": {"a": {"cmd": "true"}}}))
    with pytest.raises(UserError) as raised:
        _outdated(tmp_path, ["a"])
    assert "cannot redefine 'report'" in str(raised.value) and "\n" not in str(raised.value)


def test_a_cell_whose_inputs_came_out_unchanged_is_skipped_not_rerun(tmp_path: Path) -> None:
    """payoff reran (a new seed joined its params) and wrote the same table: the conditions that read
    it are checked again and skipped, while the one whose own inputs changed runs."""
    def cell(name: str, *after: str) -> CellRun:
        return CellRun(name, ["true"], tmp_path / f"{name}.log", tmp_path, 1, after)

    cells = [cell("payoff"), cell("condition@0", "payoff"), cell("condition@3", "payoff")]
    ray = _InlineRay({"payoff": 0, "condition@0": 0, "condition@3": 0})
    results = run_cells(ray, cells, "token", jobs=2, retries=0, on_finish=lambda i, r: None,
                        needed=lambda index: cells[index].name == "condition@3")
    assert ray.submitted == ["payoff", "condition@3"]
    assert results[1] == CellResult(0, skipped=True)
    assert "up to date once the stages it reads had run" in outcome_line(cells[1], results[1])


def test_a_cell_removes_its_outputs_before_its_command_runs_as_dvc_repro_does(tmp_path: Path) -> None:
    """A folder output left by an earlier design (an arm now found identical writes only condition.json)
    holds only what this run wrote."""
    from hackable_rl.scheduling.ray_cells import run_cell

    out = tmp_path / "results" / "k3" / "robust-s0"
    out.mkdir(parents=True)
    (out / "curve.csv").write_text("step\n1\n")
    command = [sys.executable, "-c", "import pathlib; p = pathlib.Path('results/k3/robust-s0'); p.mkdir(parents=True, "
               "exist_ok=True); (p / 'condition.json').write_text('{}')"]
    cell = CellRun("condition@k3-robust-0", command, tmp_path / "log.txt", tmp_path, 1, (), (out,))
    assert run_cell(cell, "token") == 0
    assert sorted(path.name for path in out.iterdir()) == ["condition.json"]
