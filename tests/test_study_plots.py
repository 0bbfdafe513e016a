"""Study plots that read at a glance: identical arms drawn once and labelled together, a title."""

from __future__ import annotations

import pandas as pd

from hackable_rl.report.study_plots import _distinct_arms, curves_by_cell_plot
from hackable_rl.study.records import CURVE_FILE


def _seed(folder, shift: float):
    folder.mkdir(parents=True)
    steps = range(1, 21)
    pd.DataFrame({"step": steps, "exploit_share": [shift + s / 40 for s in steps],
                  "hacking_gap": [shift / 2 + s / 80 for s in steps]}).to_csv(folder / CURVE_FILE, index=False)
    return folder


def test_methods_with_identical_curves_are_one_labelled_arm_and_the_plot_is_written(tmp_path):
    cells = {
        ("k3", method): {seed: _seed(tmp_path / "k3" / method / str(seed), 0.1 * seed) for seed in (0, 1)}
        for method in ("baseline", "corrected", "robust")
    }
    cells[("k3", "robust")] = {seed: _seed(tmp_path / "k3r" / str(seed), 0.3) for seed in (0, 1)}
    arms = _distinct_arms(cells, "k3")
    assert [label for label, _ in arms] == ["baseline = corrected", "robust"]
    assert all(len(curves) == 2 for _, curves in arms)
    path = curves_by_cell_plot(cells, tmp_path / "training_curves.png")
    assert path.stat().st_size > 0


def test_an_arm_identical_to_another_cells_arm_says_so_in_its_label(tmp_path):
    import json

    # the study table resolves an identical arm to its twin's folder: here k2's majority reads k3 baseline's
    twin = _seed(tmp_path / "k3" / "baseline-s0", 0.2)
    record = {"condition": {"method": "baseline", "cell": "k3", "seed": 0, "name": "baseline-k3-s0"},
              "status": "ok", "error": None}
    (twin / "condition.json").write_text(json.dumps(record))
    cells = {("k2", "baseline"): {0: _seed(tmp_path / "k2" / "baseline-s0", 0.0)}, ("k2", "baseline_majority"): {0: twin}}
    labels = [label for label, _ in _distinct_arms(cells, "k2")]
    assert labels == ["baseline", "baseline_majority (= k3 baseline, trained once)"]
