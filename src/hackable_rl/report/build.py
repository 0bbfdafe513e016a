"""The `report` stage: a study's report, or the root's single-run report and headline."""

from __future__ import annotations

from pathlib import Path

from hackable_rl.config.study import REPORT_KINDS, load_study, study_file_beside
from hackable_rl.core.errors import UserError
from hackable_rl.report.blind_spots import build_blind_spot_report
from hackable_rl.report.conditions import equivalence_margin
from hackable_rl.report.headline import write_headline
from hackable_rl.report.rate_grid import build_study_report
from hackable_rl.report.real_model import build_real_model_report
from hackable_rl.report.single import SingleInputs, build_single_report
from hackable_rl.report.youden import build_j_sweep_report

__all__ = ["build_report", "report_kind"]


def report_kind(study_file: Path) -> str:
    """The study file's declared `report_kind`; `rate_grid` for a results folder without a study file
    or a rate grid's (no cells). A study with cells must declare it: the report is never guessed."""
    if not study_file.is_file():
        return "rate_grid"
    study = load_study(study_file)
    if study.report_kind is None and study.cells:
        raise UserError(f"{study_file}: report_kind: required for a study with cells ({', '.join(REPORT_KINDS)})")
    return study.report_kind or "rate_grid"


def build_report(config, out_dir: Path, study: Path | None, metrics_dir: Path, headline: Path | None) -> list[str]:
    """`hackable-rl report`: a study's report (`study` is its results folder) or the root's single-run
    report from `metrics_dir` (and, with `headline`, headline.json); returns the lines to print. A
    study's equivalence margin is its study file's, beside the results folder (`study.yaml`)."""
    if study is not None:
        study_file = study_file_beside(study)
        margin = equivalence_margin(study_file)
        outcomes = Path(config.report.outcomes) if config.report.outcomes else None
        builders = {"real_model": build_real_model_report, "j_sweep": build_j_sweep_report,
                    "blind_spots": build_blind_spot_report}
        kind = report_kind(study_file)
        if kind in builders:
            built = builders[kind](study, out_dir, config.report.title, outcomes)
        else:
            built = build_study_report(study, out_dir, config.report.title, margin)
        return [f"{built.conditions} conditions ({built.failed} failed): {built.report}, {built.summary_csv}"]
    condition = f"{config.corruption.channel} at rate {config.corruption.rate:g}"
    lines = [f"report: {build_single_report(SingleInputs.under(metrics_dir), out_dir, config.report.title, condition)}"]
    if headline is not None:
        lines.append(f"headline: {write_headline(headline, SingleInputs.under(metrics_dir), config)}")
    return lines
