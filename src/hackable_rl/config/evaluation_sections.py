"""The evaluation, report and alarm sections of the experiment config: held-out evaluation, the
capability gate, the study report, the truncation probe and the hacking-onset alarm (re-exported by
`hackable_rl.config.experiment`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from hackable_rl.config.section import Section
from hackable_rl.core.bounds import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    Probability,
    Temperature,
    UnitFloat,
    at_least,
)

__all__ = ["AlarmConfig", "AuditConfig", "CapabilityConfig", "EvaluationConfig", "ReportConfig", "TruncationProbeConfig"]


# --------------------------------------------------------------------------- evaluation / report


class EvaluationConfig(Section):
    n: PositiveInt = 4
    """Completions sampled per held-out prompt."""
    k: list[PositiveInt] = [1, 2, 4]
    """pass@k values reported (each <= n)."""
    split: Literal["test", "validation"] = "test"
    """Prepared split evaluated: `test` for reported numbers, `validation` for pilots and tuning."""
    max_prompts: PositiveInt | None = 200
    """Prompts of that split evaluated (null: all)."""
    batch_size: PositiveInt = 64
    """Sequences generated per forward batch."""
    workers: PositiveInt = 1
    """Batches decoded side by side, in threads of this process sharing the loaded policy, each with
    `torch_threads / workers` of torch's threads and its batch's own seed: the same tokens as 1 where
    the kernels give the same numbers at both thread counts (`models.generation`). 2 on 2 cores: 0.8x
    a decoding's time for SmolLM2 (docs/results.md). Needs `generation.drop_finished_rows` and no
    `generation.stop`; at most `torch_threads`."""
    share_prompt_prefix: bool = True
    """Run the prompt of a prompt's n samples once in the prefill (`models.shared_prefix`)."""
    common_prefix_first: bool = False
    """Put a batch's padding after the tokens all its prompts share (a chat template's system prompt
    and the instruction: 51 of SmolLM2's 95), not before them, and run those once for the batch, each
    prompt's own tokens once, then each sample (`models.shared_prefix`, nested). Positions and masks
    are left padding's; the attention sums its terms in other lanes, so a token may differ where they
    round differently (benchmarks/bench_smollm2.py counts the completions that differ). Needs
    `share_prompt_prefix` and `generation.drop_finished_rows`."""
    merge_adapter: bool = False
    """Fold a LoRA adapter into its base weights before decoding (one matrix per layer instead of
    three at every decoding step); the sums round differently, so tokens may differ rarely."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """The policy's number type while decoding. `auto`: the loader's (bfloat16 on a GPU that has it,
    float32 on a CPU). `bfloat16` on a CPU pays only where it has avx512_bf16 or AMX (oneDNN's bf16
    matrix products: 14% off an evaluation on a 2-core AVX-512 EPYC) and rounds otherwise than float32
    and than other CPUs; its equal-results check did not show it equivalent within +-0.02
    (docs/results.md): for pilots and budgets, not for reported numbers."""
    decoding: Literal["sample", "greedy"] = "sample"
    """Stochastic sampling (temperature/top_p below) or greedy decoding."""
    greedy: bool = True
    """With sampling, also decode every prompt once greedily and report `greedy_accuracy`."""
    temperature: Temperature = 1.0
    """Sampling temperature in evaluation."""
    top_p: UnitFloat = 1.0
    """Nucleus mass in evaluation."""
    extract: Literal["strict", "boxed", "cascade", "math_verify", "auto"] = "strict"
    """How the judge extracts an answer: strict (the training format), last box, a cascade, math-verify's
    own extraction, or auto (strict for GSM8K `#### N` references, else math_verify); docs/metrics.md."""
    transfer_extract: Literal["none", "strict", "boxed", "cascade", "math_verify", "auto"] = "math_verify"
    """A second, *transferred* judge of another verifier family (math_verify: its own extraction and
    equivalence); eval.json, prompts.jsonl and reports give both judges and count where they disagree."""
    zero_shot_out: str | None = None
    """When set, also write the frozen zero-shot JSONL (prompt id -> correctness, thinking length)."""
    checkpoint_steps: list[PositiveInt] = []
    """Training steps whose permanent checkpoints a study condition also evaluates, as its final one is
    (a learning curve on `split`: checkpoints.csv beside condition.json); each must be saved, in
    `trainer.permanent_steps` or `trainer.max_steps`. Empty: the final checkpoint only."""
    metrics: list[str] = []
    """Extra report metrics (REPORT_METRICS names or `package.module:metric`): eval.json, MLflow, report.md."""

    @model_validator(mode="after")
    def _k_fits_n(self) -> EvaluationConfig:
        too_big = [k for k in self.k if k > self.n]
        if too_big:
            raise ValueError(f"evaluation.k: {too_big} exceed evaluation.n = {self.n}; pass@k needs k <= n")
        if self.decoding == "greedy" and self.n > 1:
            raise ValueError(
                f"evaluation.n: {self.n} greedy samples per prompt would be identical; use n: 1 or decoding: sample"
            )
        return self


class CapabilityConfig(Section):
    """The capability gate (`training/capability.py`): before GRPO on a pretrained model.source, sample
    `k` completions for each of `prompts` validation prompts and measure pass@k under the clean
    (strict) judge, the check the correctness reward makes. Groups that are all wrong carry no GRPO
    signal, so a policy below `min_pass_at_k` is not trained unless forced. The tiny model is never gated."""

    enabled: bool = True
    """Run the gate before GRPO on a pretrained model.source."""
    k: Annotated[int, at_least(2)] = 8
    """Completions sampled per prompt; the gate measures pass@k with n = k (rollout settings of `generation`)."""
    prompts: PositiveInt = 64
    """Validation prompts sampled (fewer when the split is smaller)."""
    min_pass_at_k: Probability = 0.05
    """Lowest pass@k at which GRPO groups carry enough signal to train."""
    force: bool = False
    """Train even when pass@k is below min_pass_at_k (the result is still recorded)."""


class ReportConfig(Section):
    out_dir: str = "reports"
    """Folder (relative to the project) for plots and report.md."""
    title: str = "hackable-rl corruption study"
    """Heading of report.md."""
    outcomes: str | None = None
    """Where a cell study's report (the blind spots, the J sweep) writes its declared outcomes
    (outcomes.json), relative to the project; null: not written."""


ALARM_SIGNALS = ("reward", "zero_advantage_share", "modal_answer_share", "answer_entropy", "pay_spread",
                 "disagreement", "mean_length", "unparsable_share", "entropy", "truncation_survival")
"""The judge-free signals every run has (`alarm/signals.py` defines each); `pay_rate/<member>` adds one per member."""


class TruncationProbeConfig(Section):
    """The truncation probe (`alarm/truncation_probe.py`): a few paid completions per step are cut
    inside their reasoning and the policy finishes them greedily; the share the verifier still pays is
    the signal `truncation_survival` (an answer that survives without its reasoning needed none)."""

    samples: NonNegativeInt = 0
    """Paid completions probed per step (0: off; each costs a short greedy generation and a scoring)."""
    keep: UnitFloat = 0.3
    """The share of the thinking block's characters kept before it is closed."""
    max_new_tokens: PositiveInt = 24
    """Tokens the policy may write after the cut (the answer)."""


class AuditConfig(Section):
    """The audited monitor (`alarm/audit.py`, docs/metrics.md "Audited alarm"): each step a seeded
    random sample of `k` completions is judged, and a test on the audited gap (the step's mean reward
    minus the audited share the judge calls right) warns; `hackable-rl alarm-bench --audit` measures it."""

    k: PositiveInt | None = None
    """Completions judged per step (null: no audit); at most the step's completions
    (trainer.effective_batch_size). Each one is a judge call, counted in `alarm/audit_judge_calls`."""
    test: Literal["cusum", "window"] = "window"
    """The sequential test on the audited gap: `cusum` (the alarm's CUSUM, h = `threshold`) or `window`
    (the judge's windowed test over `alarm.window` steps, q = `threshold`)."""
    threshold: NonNegativeFloat = 2.5
    """h or q: the audited gap's statistic must exceed it; 2.5 with `window` is what `alarm-bench --audit`
    chose on the tune replicates for k = 16 and 32 (docs/metrics.md, "Audited alarm", lists each k's)."""
    seed: NonNegativeInt = 0
    """Step t audits the completions numpy's `default_rng([seed, t])` picks: a rerun, and the benchmark's
    replay of a run folder, audit the same ones."""
    judge: str | None = None
    """`package.module:function` called as judge(completion, reference) on each audited completion,
    returning True/False or a Judgment; null: the run's independent judge (its verdict is in every record)."""
    with_judge_free: bool = False
    """Also fire on the judge-free alarm (the vote of `alarm.signals`, or `alarm.rule`), whichever crosses
    first; false: once the audit is on, it alone fires the alarm (the signals are still recorded)."""


def _is_number(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


class AlarmConfig(Section):
    """The hacking-onset alarm (`alarm/onset_alarm.py`, docs/metrics.md "Hacking-onset alarm"): a CUSUM on
    each watched judge-free signal, standardised against its first steps; it fires at most once per run."""

    enabled: bool = True
    """Compute the signals every step (alarm.jsonl and signals.csv in the run folder) and raise the alarm."""
    signals: tuple[str, ...] = ("reward", "zero_advantage_share", "modal_answer_share", "pay_spread", "disagreement")
    """The signals it watches (`ALARM_SIGNALS` or `pay_rate/<member>`); every signal is recorded anyway."""
    baseline_steps: Annotated[int, at_least(2)] = 10
    """A signal's first defined values that form its baseline (mean, sd); before it is full each value
    is standardised against the ones before it, so the alarm can fire from a signal's third step."""
    slack: NonNegativeFloat = 0.5
    """k, in baseline sds: the drift per step the CUSUM ignores (half the shift it is tuned to see)."""
    threshold: NonNegativeFloat = 10.0
    """h: a signal crosses when its CUSUM exceeds this (larger: fewer false alarms, later warnings)."""
    votes: PositiveInt = 2
    """How many watched signals must have crossed for the alarm to fire."""
    window: PositiveInt = 10
    """The judge onset's window in steps (`alarm/onset.py`: after a run, with the judge), and the
    windowed test's of a `rule` detector."""
    rule: tuple[str, ...] = ()
    """Detectors the alarm fires on, whichever crosses first: `<signal> cusum > <h>` (the CUSUM above
    with h) or `<signal> window > <q>` (the judge's windowed test on the signal, `alarm/window_detector.py`),
    as `hackable-rl alarm-bench` prints its chosen rule. Empty: the vote of `signals` above."""
    stop_training: bool = False
    """Stop training at the step the alarm fires (a resumable and a permanent checkpoint are saved there)."""
    probe: TruncationProbeConfig = TruncationProbeConfig()
    """The truncation probe (off by default: it costs generations; benchmarks/bench_alarm.py measures it)."""
    audit: AuditConfig = AuditConfig()
    """The audited monitor: k judged completions per step (off by default: each costs a judge call)."""

    @model_validator(mode="after")
    def _known_signals(self) -> AlarmConfig:
        if unknown := [s for s in self.signals if s not in ALARM_SIGNALS and not s.startswith("pay_rate/")]:
            raise ValueError(f"alarm.signals: unknown {unknown}; expected {', '.join(ALARM_SIGNALS)} or pay_rate/<member>")
        if self.votes > len(self.signals):
            raise ValueError(f"alarm.votes: {self.votes} is more than the {len(self.signals)} watched signals")
        for detector in self.rule:
            parts = detector.split()
            if (len(parts) != 4 or parts[1] not in ("cusum", "window") or parts[2] != ">" or not _is_number(parts[3])
                    or (parts[0] not in ALARM_SIGNALS and not parts[0].startswith("pay_rate/"))):
                raise ValueError(f"alarm.rule: {detector!r} is not `<signal> cusum|window > <threshold>` with a signal "
                                 f"of {', '.join(ALARM_SIGNALS)} or pay_rate/<member>")
        if self.audit.k is not None and not self.enabled:
            raise ValueError(f"alarm.audit.k: {self.audit.k} needs alarm.enabled: true (the audit is part of the alarm)")
        return self
