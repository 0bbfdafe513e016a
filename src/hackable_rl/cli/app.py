"""The `hackable-rl` command line: thin commands, each loads the config and calls one function.

Read this file top to bottom to find the path of one run: prepare -> warmstart -> train -> eval
-> report. User mistakes (bad config, bad data, missing files, unknown run ids) print one line per
problem and exit with code 2; `--debug` shows the traceback instead (`cli.errors`). Every command
runs inside `UserErrorCommands.invoke`, so a command body calls its functions directly.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
import yaml

from hackable_rl import __version__
from hackable_rl.cli import housekeeping as cli_more
from hackable_rl.cli import study_commands as cli_study
from hackable_rl.cli.alarm import alarm_bench
from hackable_rl.cli.errors import UserErrorCommands, check_range, fail, show_tracebacks
from hackable_rl.cli.options import ConfigOption, ResumeMode, SetOption
from hackable_rl.cli.options import command_config as _config
from hackable_rl.cli.options import model_config as _model_config
from hackable_rl.config.loading import describe_fields
from hackable_rl.core.redact import masked_log_handler
from hackable_rl.core.storage import check_output_path
from hackable_rl.extensions import check_builds

app = typer.Typer(
    cls=UserErrorCommands,
    name="hackable-rl",
    help="GRPO on verifiable maths against imperfect verifiers: prepare, warm start, train, evaluate, report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
log = logging.getLogger("hackable_rl")

def _version(value: bool) -> None:
    if value:
        typer.echo(f"hackable-rl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for every error.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at DEBUG level.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """hackable-rl: does a policy trained on an imperfect verifier learn to be correct, or to please it?"""
    show_tracebacks(debug)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        handlers=[masked_log_handler()],  # every log line, libraries' included, masks URI credentials
    )


@app.command()
def validate(
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    explain: Annotated[bool, typer.Option("--explain", help="Print every field with its description.")] = False,
    study: Annotated[
        Path | None,
        typer.Option("--study", help="Also check a study file's declarations: replicates, primary outcomes, family."),
    ] = None,
) -> None:
    """Validate a params file and print the resolved config (or one line per problem, exit 2)."""
    resolved = _config(config, overrides)
    if explain:
        typer.echo("\n".join(describe_fields(type(resolved))))
        return
    if study is not None:
        cli_study.check_study(study, resolved)
    typer.echo(yaml.safe_dump(resolved.model_dump(mode="json"), sort_keys=False).rstrip())
    typer.secho(f"# {config}: valid (run name {resolved.run_name})", err=True, fg=typer.colors.GREEN)


@app.command()
def judge(
    input: Annotated[Path, typer.Option("--input", "-i", help="JSONL of completions to judge.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the judged JSONL.")],
    completion_field: Annotated[str, typer.Option(help="Field holding the completion text.")] = "completion",
    reference_field: Annotated[
        str,
        typer.Option(help="Field holding the reference: GSM8K '#### N', a MATH \\boxed solution, or a bare answer."),
    ] = "reference",
    extract: Annotated[
        str,
        typer.Option(
            help="How the answer is found. auto (default): strict for GSM8K '#### N' references, math_verify "
            "for MATH-style ones (a \\boxed solution or a bare answer). strict: the training format only "
            "(one think block, one box). boxed: the last box. cascade: box, ####, 'answer is', last number. "
            "math_verify: math-verify's own extraction, boxed or not ($\\frac{10}{9}$, $[0,1)$, 'the final "
            "answer is 1/2'), over the completion's end. See docs/metrics.md."
        ),
    ] = "auto",
    rel_tol: Annotated[float, typer.Option(help="Relative tolerance of numeric comparison.")] = 1e-6,
    timeout_s: Annotated[float, typer.Option(help="Per-call math-verify timeout in seconds.")] = 2.0,
    decimal_comma: Annotated[
        bool,
        typer.Option(
            "--decimal-comma",
            help="Numbers use a decimal comma: 1,22 is 1.22 and 1.234,5 is 1234.5 (then a comma never groups "
            "thousands, and a pair (1,2) reads as 1.2). Off: 1,222 is 1222.",
        ),
    ] = False,
) -> None:
    """Judge any JSONL of completions with the independent (clean) judge; adds correct/parsed/reason."""
    from rich.console import Console

    from hackable_rl.cli.summaries import judge_table
    from hackable_rl.evaluation.judge import JudgeOptions, judge_file

    # The ranges of rewards.rel_tol and rewards.math_verify_timeout_s, the same settings in a config.
    check_range("--rel-tol", rel_tol, 0.0, 1.0)
    check_range("--timeout-s", timeout_s, 0.01, 600.0)
    check_output_path(output, "--output")
    options = JudgeOptions(extract, rel_tol, timeout_s, decimal_comma=decimal_comma)
    summary = judge_file(input, output, completion_field, reference_field, options)
    Console(width=120).print(judge_table(summary, f"judged {input} -> {output} ({extract})"))


@app.command()
def train(
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    resume: Annotated[
        ResumeMode, typer.Option("--resume", help="`auto`: continue the run of this name from its last checkpoint.")
    ] = ResumeMode.never,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start again over an existing run folder (one hackable-rl created).")
    ] = False,
    metrics_dir: Annotated[Path, typer.Option("--metrics-dir", help="Where train.json goes (DVC metrics).")] = Path(
        "metrics"
    ),
    allow_config_change: Annotated[
        bool,
        typer.Option(
            "--allow-config-change",
            help="With --resume auto: continue even though the config changed (recorded in run.json and MLflow).",
        ),
    ] = False,
) -> None:
    """Train one policy with GRPO (TRL) against the configured training verifier."""
    from hackable_rl.alarm.audit import StepAudit
    from hackable_rl.training.run import run_training

    cfg = _model_config(config, overrides)
    check_output_path(metrics_dir, "--metrics-dir", folder=True)
    check_builds(cfg)  # a plugin of the wrong shape fails before the model loads
    StepAudit.of(cfg.alarm.audit)  # so does an audit judge that does not load, before the run folder is made
    result = run_training(
        cfg, resume=resume.value, overwrite=overwrite, metrics_out=metrics_dir, allow_config_change=allow_config_change
    )
    if result.main_process:  # with several processes, the run is the main process's to report
        typer.echo(f"run {cfg.run_name}: {result.final_step} steps, MLflow run {result.run_id}, folder {result.run_dir}")


@app.command()
def prepare(config: ConfigOption = Path("params.yaml"), overrides: SetOption = None) -> None:
    """Prepare the dataset: train/eval (and sft) JSONL plus manifest.json under <cache>/datasets/<name>/."""
    from hackable_rl.data import prepare_dataset

    cfg = _config(config, overrides)
    result = prepare_dataset(cfg)
    counts = ", ".join(f"{split} {count}" for split, count in result.counts.items())
    typer.echo(f"prepared {cfg.data.name} ({cfg.data.provider}): {counts}; skipped bad rows {result.skipped_rows}")
    typer.echo(f"output: {result.out_dir}")


@app.command("eval")
def eval_command(
    run_id: Annotated[str | None, typer.Option("--run-id", help="MLflow run id of a training run.")] = None,
    step: Annotated[int | None, typer.Option("--step", help="Permanent checkpoint step (default: last).")] = None,
    all_steps: Annotated[
        bool, typer.Option("--all-steps", help="Evaluate every permanent checkpoint (a learning curve).")
    ] = False,
    model: Annotated[
        Path | None, typer.Option("--model", help="Evaluate a policy folder that has no run (default: the base).")
    ] = None,
    base: Annotated[bool, typer.Option("--base", help="Evaluate the configured base policy (no RL).")] = False,
    configured_run: Annotated[
        bool, typer.Option("--configured-run", help="Evaluate the training run this config names (DVC stages).")
    ] = False,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
    metrics_dir: Annotated[
        Path | None, typer.Option("--metrics-dir", help="Where eval.json goes (DVC metrics; none by default).")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out-dir", help="Where generations.jsonl and metrics.json go.")
    ] = None,
) -> None:
    """Independently evaluate a run's policy (or --model PATH / --base): pass@k, hacking gap, FP/FN rates.

    With --run-id, the evaluated checkpoint becomes a Model Registry version carrying its eval metrics."""
    from hackable_rl.cli.summaries import eval_lines
    from hackable_rl.evaluation.stage import evaluate as runs
    from hackable_rl.evaluation.stage.targets import target_from_model, target_from_run

    cfg = _model_config(config, overrides)
    for path, option in ((metrics_dir, "--metrics-dir"), (out_dir, "--out-dir")):
        if path is not None:
            check_output_path(path, option, folder=True)
    if sum([run_id is not None, model is not None, base, configured_run]) != 1:
        fail("eval: pass exactly one of --run-id ID, --configured-run, --model PATH or --base")
    if configured_run:
        run_id = runs.configured_run_id(cfg)
    if all_steps:
        if run_id is None:
            fail("eval --all-steps needs --run-id")
        out = runs.evaluate_all_steps(cfg, run_id, metrics_dir)
        typer.echo(f"learning curve: {out}")
        return
    if run_id is not None:
        target = target_from_run(cfg, run_id, step)
    else:
        target = target_from_model(cfg, model)
    result = runs.evaluate(target, metrics_dir, out_dir)
    for line in eval_lines(result.metrics, result.out_dir):
        typer.echo(line)


@app.command("compare")
def compare_command(
    policies: Annotated[
        list[str],
        typer.Option("--policy", help="NAME=DIR[,DIR...]: a policy's evaluation folders, one per training seed."),
    ],
    pairs: Annotated[list[str], typer.Option("--pair", help="A:B: compare policy A against B (A - B).")],
    out: Annotated[Path, typer.Option("--out", help="compare.json to write.")] = Path("metrics/compare.json"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap replicates.")] = 0,
    margin: Annotated[
        float | None,
        typer.Option("--margin", help="Equivalence margin M: adds each 90% CI and a verdict (TOST, docs/metrics.md)."),
    ] = None,
) -> None:
    """Paired comparisons with 95% t-intervals across replicates (pass@1, greedy accuracy, hacking gap) from prompts.jsonl,
    written to compare.json; --margin M adds the equivalence test (TOST: the 90% CI inside (-M, +M))."""
    from hackable_rl.evaluation.named import (
        check_out_beside_inputs,
        compare_named,
        parse_pairs,
        parse_policies,
    )
    from hackable_rl.evaluation.paired import write_comparisons

    named = parse_policies(policies)
    check_out_beside_inputs(out, named)
    comparisons = compare_named(named, parse_pairs(pairs), seed, margin)
    write_comparisons(out, comparisons)
    for name, comparison in comparisons.items():
        typer.echo(f"{name:>28}: {comparison.summary()}")
    typer.echo(f"written to {out}")


@app.command()
def warmstart(config: ConfigOption = Path("params.yaml"), overrides: SetOption = None,
              metrics_dir: Annotated[Path, typer.Option(help="Where warmstart.json goes.")] = Path("metrics")) -> None:
    """Warm-start the tiny policy (tokenizer, SFT, held-out greedy accuracy) or record a pretrained source."""
    from hackable_rl.cli.summaries import warmstart_line
    from hackable_rl.models.loading import policy_dir
    from hackable_rl.warmstart import run_warmstart

    cfg = _model_config(config, overrides)
    check_output_path(metrics_dir, "--metrics-dir", folder=True)
    metrics = run_warmstart(cfg, metrics_dir / "warmstart.json")
    typer.echo(f"{warmstart_line(metrics, cfg.model.source)}\npolicy: {policy_dir(cfg)}")


@app.command()
def report(
    study: Annotated[Path | None, typer.Option("--study", help="Folder holding the study's condition.json files.")] = None,
    single: Annotated[bool, typer.Option("--single", help="Report the root pipeline's single run.")] = False,
    refresh_onsets: Annotated[bool, typer.Option(help="--study: first recompute onset.json from the run folders.")] = False,
    metrics_dir: Annotated[
        Path, typer.Option("--metrics-dir", help="--single: warmstart.json, base/, clean/s*/, trained/s*/, compare.json.")
    ] = Path("metrics"),
    out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: report.out_dir).")] = None,
    headline: Annotated[Path | None, typer.Option("--headline", help="--single: also write this headline.json.")] = None,
    config: ConfigOption = Path("params.yaml"),
    overrides: SetOption = None,
) -> None:
    """Write plots (PNG) and report.md: a study's summary table (--study DIR) or the single run (--single)."""
    from hackable_rl.alarm.onset import rewrite_onsets
    from hackable_rl.report.build import build_report

    cfg = _config(config, overrides)
    if (study is None) == (not single):
        fail("report: pass exactly one of --study DIR or --single")
    target = out or Path(cfg.report.out_dir)
    check_output_path(target, "--out" if out else "report.out_dir", folder=True)
    if headline is not None:
        check_output_path(headline, "--headline")
    if refresh_onsets and study is not None:
        typer.echo(f"onset.json rewritten from {len(rewrite_onsets(study))} run folders")
    typer.echo("\n".join(build_report(cfg, target, study, metrics_dir, headline)))


# Beside the path of one run: running commands side by side, and MLflow housekeeping.
app.command("seeds", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
    cli_more.seeds_command
)
app.command()(cli_more.lanes)
app.command()(cli_more.sync)
app.command()(cli_more.promote)
app.command()(cli_more.ui)
# The study commands: the payoff table (and the arms identical by construction), one study condition.
app.command()(cli_study.payoff)
app.command()(cli_study.condition)
app.command()(cli_study.pilots)
app.command("alarm-bench")(alarm_bench)
app.command("docs-blocks")(cli_more.docs_blocks)
