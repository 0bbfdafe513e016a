"""report.moved: how far each trained arm moved from its replicate's base on the same test prompts."""

from __future__ import annotations

from pathlib import Path

from hackable_rl.core.jsonl import write_jsonl
from hackable_rl.report.moved import moved_from_base, moved_lines, write_moved


def _prompts(folder: Path, correct: list[int], greedy: list[bool | None]) -> Path:
    write_jsonl(folder / "prompts.jsonl", [
        {"prompt_id": f"p{i}", "n": 4, "correct": c, "greedy_correct": g, "observed_reward": None, "hacking_gap": None}
        for i, (c, g) in enumerate(zip(correct, greedy, strict=True))])
    return folder


def test_each_arm_is_compared_with_the_base_of_its_own_replicate(tmp_path) -> None:
    cells = {("blind", "base"): {0: _prompts(tmp_path / "b0", [0, 1, 2, 4], [False, False, True, True]),
                                 1: _prompts(tmp_path / "b1", [1, 1, 1, 1], [True, True, None, True])},
             ("clean", "baseline"): {0: _prompts(tmp_path / "t0", [0, 2, 2, 4], [False, True, True, True]),
                                     1: _prompts(tmp_path / "t1", [1, 2, 3, 4], [True, True, True, False]),
                                     2: _prompts(tmp_path / "t2", [1, 1, 1, 1], [True] * 4)}}  # no base of seed 2

    rows = moved_from_base(cells)

    assert [(r.method, r.seed) for r in rows] == [("baseline", 0), ("baseline", 1)]
    assert (rows[0].same_correct, rows[0].same_greedy) == (0.75, 0.75)
    assert rows[1].same_correct == 0.25 and rows[1].same_greedy == 2 / 3  # an unjudged greedy verdict is left out
    assert rows[1].correlation is None  # base's counts are constant: no correlation, not 0
    assert rows[0].correlation is not None and rows[0].correlation > 0.9
    assert "| clean | baseline | 2 | 25%-75% | 67%-75% |" in "\n".join(moved_lines(rows))
    assert write_moved(rows, tmp_path).read_text().splitlines()[2].endswith(",1,4,0.25,0.6666666666666666,")
