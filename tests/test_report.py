"""Study table, plots and report.md from synthetic condition.json files (no model, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hackable_rl.report.aggregate import seed_stats, slope
from hackable_rl.report.conditions import study_table
from hackable_rl.report.rate_grid import PLOTS, build_study_report
from hackable_rl.report.single import SingleInputs, build_single_report
from hackable_rl.study.records import (
    collect_study,
    find_condition_files,
    write_condition,
    write_summary,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _metrics(correct: float, gap: float, disagreement: float = 0.0) -> dict:
    return {
        "run_name": "x", "step": 10, "n_samples": 8, "pass_at_1": correct, "accuracy": correct,
        "pass_at_2": min(1.0, correct + 0.1), "pass_at_4": min(1.0, correct + 0.2),
        "observed_reward": correct + gap, "hacking_gap": gap, "false_positive_rate": None,
        "disagreement": disagreement,
    }


def _write(root: Path, method: str, rate: float, seed: int, eval_metrics: dict | None, error: str | None = None,
           channel: str = "bias", run_name: str | None = None, folder: str | None = None) -> Path:
    name = f"{method}-{channel}-r{rate:g}-s{seed}"
    record = {
        "condition": {"method": method, "rate": rate, "seed": seed, "channel": channel, "flaw": None, "name": name},
        "run_name": run_name or name,
        "status": "failed" if error else "ok",
        "error": error,
        "eval": eval_metrics or {},
        "train": {} if method == "base" or error else {"judge/correctness/last": 0.5, "hacking_gap/last": 0.1},
    }
    return write_condition(root / (folder or name) / "condition.json", record)


# Synthetic study where robust shaping is WORSE than the baseline and the baseline gap grows with
# the rate: the report must say both plainly. Its channel (bias: flips on selected examples only) is
# one whose gap the policy can move; under flip the gap only restates accuracy (a test below).
CORRECT = {"base": (0.50, 0.50), "baseline": (0.70, 0.60), "robust": (0.60, 0.50)}  # at rate 0, 0.4
GAP = {"base": (0.00, 0.10), "baseline": (0.00, 0.30), "robust": (0.00, 0.35)}


@pytest.fixture()
def study(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for method in CORRECT:
        for index, rate in enumerate((0.0, 0.4)):
            for seed, jitter in enumerate((-0.01, 0.01)):
                _write(root, method, rate, seed, _metrics(CORRECT[method][index] + jitter, GAP[method][index]))
    _write(root, "robust", 0.4, 2, None, error="RuntimeError: CUDA out of memory")
    return root


def test_table_keeps_the_failed_condition_with_its_error(study: Path, tmp_path: Path) -> None:
    table = collect_study(find_condition_files(study))
    assert len(table) == 13
    failed = table[table["status"] == "failed"]
    assert failed["name"].tolist() == ["robust-bias-r0.4-s2"]
    assert failed["error"].iloc[0] == "RuntimeError: CUDA out of memory"
    assert pd.isna(failed["pass_at_1"].iloc[0])
    assert table["method"].tolist()[:1] == ["base"] and table["method"].tolist()[-1] == "robust"
    csv_path, json_path = write_summary(table, tmp_path / "out")
    rows = json.loads(json_path.read_text())
    failed_row = next(row for row in rows if row["status"] == "failed")
    assert failed_row["pass_at_1"] is None and failed_row["error"] == "RuntimeError: CUDA out of memory"
    assert rows[0]["false_positive_rate"] is None  # undefined stays null, never NaN
    text = csv_path.read_text()
    assert "nan" not in text.lower().replace("no", "")
    assert "robust-bias-r0.4-s2,robust,0.4,2,bias,,failed,RuntimeError: CUDA out of memory," in text


def test_seed_stats_mean_sd_n(study: Path) -> None:
    table = collect_study(find_condition_files(study))
    stats = seed_stats(table, "pass_at_1")
    row = stats[(stats["method"] == "baseline") & (stats["rate"] == 0.4)].iloc[0]
    assert row["mean"] == pytest.approx(0.60)
    assert row["sd"] == pytest.approx(0.01414213, rel=1e-5)  # sd of 0.59, 0.61 with ddof 1
    assert row["n"] == 2
    failed_excluded = stats[(stats["method"] == "robust") & (stats["rate"] == 0.4)].iloc[0]
    assert failed_excluded["n"] == 2


def test_slope_is_least_squares() -> None:
    assert slope(pd.Series([0.0, 0.5, 1.0]), pd.Series([0.0, 1.0, 2.0])) == pytest.approx(2.0)
    assert slope(pd.Series([0.2, 0.2]), pd.Series([1.0, 2.0])) is None


def test_every_plot_is_a_png_and_report_states_unfavourable_results(study: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    built = build_study_report(study, out, "synthetic study")
    assert set(built.plots) == set(PLOTS)
    for path in built.plots.values():
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 1000
    assert (built.conditions, built.failed) == (13, 1)
    text = built.report.read_text()
    assert text.startswith("# synthetic study")
    assert "13 conditions, 12 ok, 1 failed" in text
    assert "| robust-bias-r0.4-s2 | RuntimeError: CUDA out of memory |" in text
    assert "- rate 0: highest mean correctness **baseline** (baseline 0.700, robust 0.600, base 0.500)." in text
    assert "**Unfavourable for robust:** its correctness is not higher than baseline's at 2 of 2 rates (0, 0.4)." in text
    assert "- baseline: hacking gap 0.000 at rate 0 -> 0.300 at rate 0.4 (slope 0.750 per unit rate): grows with the rate." in text
    assert "**Unfavourable for robust:** its hacking gap is not lower than baseline's at 2 of 2 rates (0, 0.4)." in text
    assert "0.700 ± 0.014 (n=2)" in text
    for name in PLOTS.values():
        assert f"]({name})" in text


def test_report_says_favourable_only_when_numbers_support_it(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for seed, jitter in enumerate((-0.01, 0.01)):
        _write(root, "baseline", 0.2, seed, _metrics(0.50 + jitter, 0.2))
        _write(root, "robust", 0.2, seed, _metrics(0.70 + jitter, 0.05))
    text = build_study_report(root, tmp_path / "out", "t").report.read_text()
    assert "Unfavourable for robust" not in text
    assert "- robust's correctness is higher than baseline's at all 1 rates" in text
    assert "robust is higher by 0.200 (larger than one sd)" in text
    assert "- robust: one rate only, no trend." in text


def test_close_means_are_called_indistinguishable(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for seed, jitter in enumerate((-0.1, 0.1)):
        _write(root, "baseline", 0.2, seed, _metrics(0.50 + jitter, 0.2))
        _write(root, "robust", 0.2, seed, _metrics(0.52 + jitter, 0.2))
    text = build_study_report(root, tmp_path / "out", "t").report.read_text()
    assert "robust is higher by 0.020 (within one sd: not distinguishable at this number of seeds)" in text


def test_controls_get_their_own_names_and_rows_never_a_methods(tmp_path: Path) -> None:
    # The format-only control runs baseline at rate 0 like the clean reference, and its condition
    # says so; its run name (control-<name>-s<seed>) makes it a control in the table and the report.
    root = tmp_path / "results"
    for seed, jitter in enumerate((-0.01, 0.01)):
        _write(root, "baseline", 0.0, seed, _metrics(0.70 + jitter, 0.0), channel="flip", folder=f"reference/s{seed}")
        _write(root, "baseline", 0.0, seed, _metrics(0.40 + jitter, 0.0), channel="flip",
               run_name=f"control-format_only-s{seed}", folder=f"controls/format_only-s{seed}")
        _write(root, "baseline", 0.5, seed, _metrics(0.45 + jitter, 0.03), channel="flip",
               run_name=f"control-random_reward-s{seed}", folder=f"controls/random_reward-s{seed}")
        _write(root, "baseline", 0.2, seed, _metrics(0.65 + jitter, -0.06), channel="flip")
    table = study_table(root)
    assert table["name"].is_unique and table["name"].tolist()[-4:] == [
        "control-format_only-s0", "control-format_only-s1", "control-random_reward-s0", "control-random_reward-s1"]
    assert table["control"].tolist()[-4:] == ["format_only", "format_only", "random_reward", "random_reward"]
    assert table["control"].isna().sum() == 4 and list(table.columns[:3]) == ["name", "method", "control"]
    text = build_study_report(root, tmp_path / "out", "t").report.read_text()
    assert "| 0 | 0.700 ± 0.014 (n=2) |" in text  # the clean reference alone, not pooled with the control
    assert "| 0.5 |" not in text.split("### Controls")[0].split("## Training verifier")[1]
    assert "| control-format_only | baseline | 0 | 0.400 ± 0.014 (n=2) |" in text
    assert "| control-random_reward | baseline | 0.5 | 0.450 ± 0.014 (n=2) |" in text
    assert "- baseline: correctness 0.700 at rate 0 -> 0.650 at rate 0.2" in text
    summary = (tmp_path / "out" / "summary.csv").read_text()
    assert "control-format_only-s0,baseline,format_only,0.0,0,flip," in summary


def test_under_flip_the_gap_is_labelled_a_restatement_and_not_read(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for method, rate, gap in (("baseline", 0.2, -0.06), ("baseline", 0.4, -0.09), ("robust", 0.2, -0.05)):
        for seed, jitter in enumerate((-0.01, 0.01)):
            _write(root, method, rate, seed, _metrics(0.6 + jitter, gap), channel="flip")
    text = build_study_report(root, tmp_path / "out", "t").report.read_text()
    assert "### Hacking gap (observed reward - correctness), mean ± sd over seeds: restates pass@1 under flip" in text
    assert "these numbers restate correctness, so no trend or method comparison is read from them" in text
    assert "Does the gap grow with the rate?" not in text and "Does robust shaping reduce the gap?" not in text


def test_two_conditions_with_one_name_are_refused_naming_both_files(tmp_path: Path) -> None:
    from hackable_rl.core.errors import UserError

    root = tmp_path / "results"
    first = _write(root, "baseline", 0.0, 0, _metrics(0.7, 0.0), folder="reference/s0")
    second = _write(root, "baseline", 0.0, 0, _metrics(0.4, 0.0), folder="controls/format_only-s0")
    with pytest.raises(UserError) as refused:
        build_study_report(root, tmp_path / "out", "t")
    (line,) = refused.value.problems
    assert str(first) in line and str(second) in line and "'baseline-bias-r0-s0'" in line
    assert not (tmp_path / "out" / "summary.csv").exists()


def test_no_conditions_is_a_user_error(tmp_path: Path) -> None:
    from hackable_rl.core.errors import UserError

    with pytest.raises(UserError, match="no condition.json below it"):
        build_study_report(tmp_path, tmp_path / "out", "t")


def _policy(folder: Path, correct: list[int], greedy: list[bool], eval_metrics: dict) -> None:
    from hackable_rl.evaluation.prompt_results import PromptResult, write_prompt_results

    folder.mkdir(parents=True, exist_ok=True)
    rows = [PromptResult(f"p{i}", 4, c, g, None, None) for i, (c, g) in enumerate(zip(correct, greedy, strict=True))]
    write_prompt_results(folder / "prompts.jsonl", rows)
    (folder / "eval.json").write_text(json.dumps(eval_metrics))


def test_single_report_from_metrics_folder(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics"
    for seed, accuracy in ((0, 0.55), (1, 0.6)):  # one warm start per replicate
        (metrics / "warmstart" / f"s{seed}").mkdir(parents=True)
        (metrics / "warmstart" / f"s{seed}" / "warmstart.json").write_text(json.dumps({"accuracy": accuracy}))
    _policy(metrics / "base" / "s0", [1, 1, 1, 1], [False, True, False, True], {"pass_at_1": 0.25, "pass_at_4": 0.8})
    for seed in (0, 1):
        _policy(metrics / "clean" / f"s{seed}", [4, 3, 4, 4], [True] * 4, {"pass_at_1": 0.9375, "pass_at_4": 1.0})
        (metrics / "clean" / f"s{seed}" / "train_curve.csv").write_text("step,judge_correctness\n1,0.5\n2,0.7\n")
    _policy(metrics / "trained" / "s0", [2, 2, 2, 2], [True, True, False, False], {"pass_at_1": 0.5})
    entry = {"metric": "pass_at_1", "n_prompts": 4, "n_samples": 16, "n_replicates": 2, "per_replicate": [0.6, 0.7],
             "sd": 0.07, "p_value": 0.01, "conditional_ci_low": 0.6, "conditional_ci_high": 0.75}
    (metrics / "compare.json").write_text(json.dumps({
        "clean_vs_base": {**entry, "diff": 0.6875, "ci_low": 0.6, "ci_high": 0.75},
        "trained_vs_clean": {**entry, "diff": -0.01, "ci_low": -0.05, "ci_high": 0.03},
        "trained_vs_base": {**entry, "n_replicates": 1, "per_replicate": [0.2], "sd": None, "p_value": None,
                            "diff": 0.2, "ci_low": None, "ci_high": None, "reason": "one replicate: a pilot"},
    }))
    out = tmp_path / "reports"
    report = build_single_report(SingleInputs.under(metrics), out, "root run", "flip at rate 0.2")
    text = report.read_text()
    assert "- warm start, validation greedy accuracy: 0.550, 0.600 (2 warm starts)" in text
    assert "- base (no RL): sampled pass@1 0.250 (one replicate" in text and "(1 replicate)" in text
    assert "- clean-trained (rate 0): sampled pass@1 0.938 [0.938, 0.938]" in text and "(2 replicates)" in text
    assert "- clean_vs_base: pass_at_1 +0.688 [0.600, 0.750] (4 prompts, 2 replicate(s))" in text
    assert "- trained_vs_base: pass_at_1 +0.200 (one replicate: a pilot)" in text
    assert "- trained_vs_clean: pass_at_1 -0.010 [-0.050, 0.030], no difference detected" in text
    assert "| metric | base (no RL) | clean-trained (rate 0) | trained (flip at rate 0.2) |" in text
    assert "| pass_at_4 | 0.800 | 1.000 | n/a |" in text
    assert "No train.json." in text
    for name in ("headline.png", "train_curves.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC


def test_headline_is_the_corrupted_runs_with_their_ci_and_the_clean_reference(tmp_path: Path) -> None:
    from hackable_rl.evaluation.prompt_results import PromptResult, write_prompt_results
    from hackable_rl.report.headline import HEADLINE_KEYS, headline_metrics

    metrics = tmp_path / "metrics"
    for seed, correct in ((0, [2, 2, 2, 2]), (1, [4, 4, 4, 4])):
        folder = metrics / "trained" / f"s{seed}"
        folder.mkdir(parents=True)
        rows = [PromptResult(f"p{i}", 4, c, None, c / 4 + 0.25, 0.25) for i, c in enumerate(correct)]
        write_prompt_results(folder / "prompts.jsonl", rows)
    _policy(metrics / "clean" / "s0", [4, 3, 4, 4], [True] * 4, {})
    headline = headline_metrics(SingleInputs.under(metrics), "robust", "flip", 0.4)
    assert tuple(headline) == HEADLINE_KEYS
    assert headline["condition"] == "robust-flip-r0.4" and headline["seeds"] == "0,1"
    assert headline["pass@1"] == 0.75  # seed means 0.5 and 1.0
    # two replicates, 0.5 and 1.0: t(0.975, 1) = 12.7, so the interval is the whole range a pass@1 can take
    assert headline["ci_low"] == 0.0 and headline["ci_high"] == 1.0
    assert headline["gap"] == 0.25 and headline["clean"] == 0.938
    empty = headline_metrics(SingleInputs.under(tmp_path / "none"), "baseline", "flip", 0.2)
    assert empty["seeds"] == "" and empty["pass@1"] is None and empty["clean"] is None


def test_report_cli_single_writes_the_headline_dvc_shows(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    metrics = tmp_path / "metrics"
    _policy(metrics / "base", [1, 1, 1, 1], [False] * 4, {})
    _policy(metrics / "trained" / "s0", [2, 2, 2, 2], [True] * 4, {})
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    headline = tmp_path / "headline.json"
    result = CliRunner().invoke(app, ["report", "--single", "--metrics-dir", str(metrics), "--out",
                                      str(tmp_path / "reports"), "--headline", str(headline), "--config", str(params)])
    assert result.exit_code == 0, result.output
    written = json.loads(headline.read_text())
    assert written["condition"] == "baseline-flip-r0.2" and written["pass@1"] == 0.5 and written["clean"] is None
    folder = CliRunner().invoke(app, ["report", "--single", "--headline", str(tmp_path), "--config", str(params)])
    assert folder.exit_code == 2 and "is a folder" in folder.output


def test_report_cli_study(study: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from hackable_rl.cli import app

    params = Path(__file__).resolve().parents[1] / "params.yaml"
    out = tmp_path / "cli-out"
    result = CliRunner().invoke(app, ["report", "--study", str(study), "--out", str(out), "--config", str(params)])
    assert result.exit_code == 0, result.output
    assert "13 conditions (1 failed)" in result.output
    assert (out / "summary.csv").exists() and (out / "report.md").exists()
    neither = CliRunner().invoke(app, ["report", "--config", str(params)])
    assert neither.exit_code == 2
