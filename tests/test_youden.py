"""The J sweep: the asymmetric channel given its false-positive and false-negative rates directly, noise
cells in a study file, and the report's outcomes and verdicts for the two predictions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from hackable_rl.core.errors import UserError
from hackable_rl.evaluation.prompt_results import PromptResult, write_prompt_results
from hackable_rl.extensions import load_resolved
from hackable_rl.report.build import build_report
from hackable_rl.report.declared import load_cell_conditions
from hackable_rl.report.youden import prediction_verdicts, read_design, sweep_outcomes
from hackable_rl.reward.channels import Asymmetric
from hackable_rl.reward.checkers import CheckerOptions
from hackable_rl.reward.corruption import build_channel
from hackable_rl.reward.pipeline import build_reward_pipeline
from hackable_rl.reward.types import Example
from hackable_rl.study.cells import NoiseCell, cell_overrides, noise_cells, read_cell

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "pipelines" / "corruption_sweep"
RIGHT, WRONG = "<think>7+5=12</think> \\boxed{12}", "<think>7+5=12</think> \\boxed{11}"


def _channel(rate: float, **kwargs):
    return build_channel(SimpleNamespace(channel="asymmetric", rate=rate, kwargs=kwargs), CheckerOptions())


def test_the_asymmetric_channel_takes_its_rates_directly_with_rate_their_mean() -> None:
    assert _channel(0.2, fpr=0.3, fnr=0.1) == Asymmetric(0.3, 0.1)
    assert _channel(0.4, fn_scale=0.5) == Asymmetric(0.4, 0.2)  # the scaled form is unchanged
    with pytest.raises(UserError, match=r"corruption.rate: 0.4 with fpr 0.3 and fnr 0.1; it must be their mean, 0.2"):
        _channel(0.4, fpr=0.3, fnr=0.1)
    with pytest.raises(UserError, match="fpr and fnr go together"):
        _channel(0.2, fpr=0.3)
    with pytest.raises(UserError, match="drop fp_scale and fn_scale"):
        _channel(0.2, fpr=0.3, fnr=0.1, fp_scale=2.0)
    with pytest.raises(UserError, match=r"corruption.kwargs.fnr: 1.5 is not in \[0, 1\]"):
        _channel(0.2, fpr=0.3, fnr=1.5)


def test_equal_j_cells_train_under_their_own_rates_and_run_names() -> None:
    fp, fn = (read_cell(SWEEP / "study.yaml", name) for name in ("fp0.3-fn0.1", "fp0.1-fn0.3"))
    assert (fp.youden, fn.youden, fp.rate, fn.rate) == (0.6, 0.6, 0.2, 0.2)
    configs = [load_resolved(SWEEP / "params.yaml", cell_overrides(cell)) for cell in (fp, fn)]
    assert configs[0].run_name != configs[1].run_name  # the rate alone (0.2 for both) would not tell them apart
    assert configs[0].run_name == "baseline-asymmetric-r0.2-fp0.3-fn0.1-s0"
    examples = [Example(f"p{i}", "12") for i in range(4000)]
    pipeline = build_reward_pipeline(configs[0])
    paid_right = np.mean(pipeline.verify([RIGHT] * len(examples), examples).ensemble.aggregate)
    paid_wrong = np.mean(pipeline.verify([WRONG] * len(examples), examples).ensemble.aggregate)
    assert paid_right == pytest.approx(0.9, abs=0.02) and paid_wrong == pytest.approx(0.3, abs=0.02)
    reference = read_cell(SWEEP / "study.yaml", "clean")
    assert isinstance(reference, NoiseCell) and load_resolved(SWEEP / "params.yaml", cell_overrides(reference)).condition == "clean"


def _study(root: Path, equal_j: list[list[str]]) -> Path:
    cells = {"fp0.3-fn0.1": {"fpr": 0.3, "fnr": 0.1}, "fp0.1-fn0.3": {"fpr": 0.1, "fnr": 0.3},
             "fp0.2-fn0.2": {"fpr": 0.2, "fnr": 0.2}, "fp0.6-fn0.6": {"fpr": 0.6, "fnr": 0.6}}
    study = {"report_kind": "j_sweep", "cells": cells, "reference": {"cell": "clean", "fpr": 0.0, "fnr": 0.0}, "equal_j": equal_j,
             "equivalence_margin": 0.02}
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    return root / "results"


def _condition(results: Path, cell: str, method: str, seed: int, correct: np.ndarray) -> None:
    folder = results / cell / f"{method}-s{seed}"
    folder.mkdir(parents=True)
    name = f"{method}-{cell}-s{seed}"
    record = {"condition": {"method": method, "rate": 0.2, "seed": seed, "channel": "asymmetric", "flaw": None,
                            "cell": cell, "name": name}, "run_name": name, "status": "ok",
              "eval": {"pass_at_1": float(correct.mean() / 4)}, "train": {}}
    (folder / "condition.json").write_text(json.dumps(record))
    # The transferred judge agrees with the strict one but for one sample more on prompt 0.
    write_prompt_results(folder / "prompts.jsonl", [PromptResult(f"p{i}", 4, int(c), None, None, None, 4,
                                                                 min(4, int(c) + (i == 0)))
                                                    for i, c in enumerate(correct)])


def _sweep(tmp_path: Path, fp_heavy_shift: int) -> Path:
    """Base at 2 of 4 per prompt; every trained cell at 3 of 4, the fp-heavy cell `fp_heavy_shift` lower
    on every prompt, the J < 0 cell at 1 of 4."""
    results = _study(tmp_path, [["fp0.3-fn0.1", "fp0.1-fn0.3"], ["fp0.1-fn0.3", "fp0.2-fn0.2"]])
    rng = np.random.default_rng(0)
    for seed in (0, 1, 2):
        noise = rng.integers(0, 2, size=300)
        _condition(results, "clean", "base", seed, 1 + noise)
        _condition(results, "clean", "baseline", seed, 3 + 0 * noise)
        for cell in ("fp0.1-fn0.3", "fp0.2-fn0.2"):
            _condition(results, cell, "baseline", seed, 2 + noise)
        _condition(results, "fp0.3-fn0.1", "baseline", seed, 2 + noise - fp_heavy_shift)
        _condition(results, "fp0.6-fn0.6", "baseline", seed, noise)
    return results


def test_equal_gain_at_equal_j_is_supported_and_precision_refuted(tmp_path: Path) -> None:
    results = _sweep(tmp_path, fp_heavy_shift=0)
    outcomes = sweep_outcomes(load_cell_conditions(results), read_design(tmp_path / "study.yaml")).outcomes
    by = {(o.name, o.cell): o for o in outcomes if o.metric == "pass_at_1"}
    transferred = {(o.name, o.cell): o for o in outcomes if o.metric == "pass_at_1_transfer"}
    assert set(transferred) == set(by)  # every pass@1 row beside the same comparison under the other judge
    assert all(o.secondary and o.p_holm is None for o in transferred.values())
    assert transferred[("learning_gain", "fp0.2-fn0.2")].met
    pair = by[("equal_j_equal_gain", "fp0.3-fn0.1 vs fp0.1-fn0.3")]
    assert pair.diff == pytest.approx(0.0) and pair.met  # identical on every prompt: equivalent
    assert by[("precision_matters_more", "fp0.3-fn0.1 vs fp0.1-fn0.3")].met is False
    gain = by[("learning_gain", "fp0.2-fn0.2")]
    assert gain.b == "base" and gain.diff == pytest.approx(0.25) and gain.met
    collapse = by[("learning_gain", "fp0.6-fn0.6")]
    assert collapse.diff == pytest.approx(-0.25) and collapse.target == "below base (ci_high < 0)" and collapse.met
    assert by[("learning_gain", "clean")].met and "corrected_vs_baseline" not in {o.name for o in outcomes}


def test_the_report_states_each_predictions_verdict_and_writes_each_outcome_once(tmp_path: Path) -> None:
    results = _sweep(tmp_path, fp_heavy_shift=1)
    config = SimpleNamespace(report=SimpleNamespace(title="J sweep", outcomes=str(tmp_path / "outcomes.json")))
    build_report(config, tmp_path / "reports", results, tmp_path, None)
    text = (tmp_path / "reports" / "report.md").read_text()
    assert "Equal J gives equal gain (Rate or Fate): refuted." in text
    assert "(precision matters more): supported.** -0.250" in text
    assert "| gain, transferred judge [95% CI] |" in text and "No verdict depends on the judge." in text
    assert (tmp_path / "reports" / "gain_vs_j.png").stat().st_size > 0
    outcomes = json.loads((tmp_path / "outcomes.json").read_text())
    keys = {"name", "cell", "a", "b", "metric", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "target", "met",
            "n_replicates", "per_replicate", "interval_method", "p_value", "p_holm", "met_after_holm", "secondary", "affine",
            "sign_p", "mde"}
    # the TOST reading, where the outcome is tested against the declared margin
    assert all(set(entry) - {"equivalence"} == keys for entry in outcomes)
    assert any("equivalence" in entry for entry in outcomes)
    family = [entry for entry in outcomes if entry["p_holm"] is not None]  # Holm over the detection targets
    assert family and all(entry["p_holm"] >= entry["p_value"] for entry in family)
    assert all(entry["met_after_holm"] in (None, False) or entry["met"] for entry in outcomes)
    assert len({(o["name"], o["cell"], o["a"], o["metric"]) for o in outcomes}) == len(outcomes)


def test_a_malformed_noise_cell_or_pair_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"cells": {"bad": {"fpr": 0.3}}}))
    with pytest.raises(UserError, match=r"study.yaml: cells.bad must be \{fpr: P, fnr: P\}"):
        noise_cells(tmp_path / "study.yaml")
    _study(tmp_path, [["fp0.3-fn0.1", "fp0.6-fn0.6"]])
    with pytest.raises(UserError, match=r"equal_j\[0\]: fp0.3-fn0.1 has J 0.6, fp0.6-fn0.6 -0.2"):
        read_design(tmp_path / "study.yaml")


def test_the_precision_verdict_reads_its_own_comparison_whatever_order_the_pair_is_listed_in(tmp_path: Path) -> None:
    results = _sweep(tmp_path, fp_heavy_shift=0)
    _study(tmp_path, [["fp0.1-fn0.3", "fp0.3-fn0.1"]])  # more false negatives first
    verdicts = prediction_verdicts(sweep_outcomes(load_cell_conditions(results), read_design(tmp_path / "study.yaml")))
    assert verdicts["precision_matters_more"][0] == "refuted"  # equivalent within the margin: refuted
    assert verdicts["equal_j_equal_gain"][0] == "supported"


def test_a_prediction_resting_on_a_difference_that_does_not_survive_holm_is_not_distinguishable() -> None:
    from types import SimpleNamespace

    from hackable_rl.report.declared import Outcome
    from hackable_rl.report.youden import SweepOutcomes

    label = "fp0.3-fn0.1 vs fp0.1-fn0.3"
    edge = dict(cell=label, a="baseline@fp0.3-fn0.1", b="baseline@fp0.1-fn0.3", metric="pass_at_1", mean_a=0.736,
                mean_b=0.749, diff=-0.013, ci_low=-0.025, ci_high=-0.001, met=True, n_replicates=3, p_value=0.043)
    precision = Outcome(name="precision_matters_more", target="ci_high < 0", p_holm=0.26, met_after_holm=False, **edge)
    raw_difference = SimpleNamespace(equivalence=SimpleNamespace(verdict="different"))  # the pair's own test, raw
    verdicts = prediction_verdicts(SweepOutcomes([precision], {label: raw_difference}, None))
    assert verdicts["precision_matters_more"][0] == "not distinguishable"
    assert "Holm" in verdicts["precision_matters_more"][1]
    assert verdicts["equal_j_equal_gain"][0] == "not distinguishable"  # its refutation rested on the same test
    survives = Outcome(name="precision_matters_more", target="ci_high < 0", p_holm=0.01, met_after_holm=True, **edge)
    verdicts = prediction_verdicts(SweepOutcomes([survives], {label: raw_difference}, None))
    assert verdicts["precision_matters_more"][0] == "supported" and verdicts["equal_j_equal_gain"][0] == "refuted"


def test_the_random_reward_controls_no_gain_claim_is_tested_against_the_margin_not_against_0() -> None:
    """A J = 0 cell that loses clearly meets "no gain (ci_high <= 0.02)"; its p-value is the one-sided
    test of gain < 0.02, small, not the two-sided test against 0, which a loss would make small too and
    a gain of exactly 0 would make 1 (so Holm could never confirm "no gain" on a cell with none)."""
    from hackable_rl.report.declared import Outcome
    from hackable_rl.report.youden import _tested_against

    def control(per_replicate):
        values = np.asarray(per_replicate)
        return Outcome(name="learning_gain", cell="fp0.5-fn0.5", a="baseline", b="base", metric="pass_at_1",
                       mean_a=0.5, mean_b=0.5, diff=float(values.mean()), ci_low=None, ci_high=None,
                       target="no gain", met=True, n_replicates=len(values), per_replicate=tuple(per_replicate),
                       p_value=0.5)

    flat = _tested_against(control([0.001, -0.002, 0.0005, -0.001, 0.0015]), 0.02)
    assert flat.p_value < 1e-4  # a gain of about 0 is far below the margin
    loss = _tested_against(control([-0.13, -0.05, -0.25, -0.02, -0.2]), 0.02)
    assert loss.p_value < 0.05
    gain = _tested_against(control([0.05, 0.06, 0.04, 0.07, 0.05]), 0.02)
    assert gain.p_value > 0.95  # above the margin: "no gain" fails
