"""Typed experiment configuration: Pydantic models that mirror `params.yaml`.

Every section is frozen and forbids unknown keys; every field carries its docstring as its
description (`use_attribute_docstrings`). Derived values are computed and checked right after
parsing, so a config that validates is a config that can run.

This is the bottom floor of the package: it imports only pydantic, the bounds and the field types.
Reading a params file, `--set` overrides and validation with one line per problem live above it,
in `hackable_rl.config.loading` (`load_config`, `validate_config`).
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from hackable_rl.config.data_sections import ArithConfig, CurriculumConfig, CurriculumSource, DataConfig
from hackable_rl.config.evaluation_sections import (
    ALARM_SIGNALS,
    AlarmConfig,
    AuditConfig,
    CapabilityConfig,
    EvaluationConfig,
    ReportConfig,
    TruncationProbeConfig,
)
from hackable_rl.config.field_types import (
    ExperimentName,
    FolderName,
    FolderPath,
    ModelName,
)
from hackable_rl.config.reward_sections import (
    CorruptionConfig,
    ObjectiveConfig,
    RewardsConfig,
    VerifierConfig,
    VerifierMember,
)
from hackable_rl.config.section import Section
from hackable_rl.config.training_sections import (
    GenerationConfig,
    LoraConfig,
    ModelConfig,
    TinyModelConfig,
    TrainerConfig,
    WarmstartConfig,
)
from hackable_rl.core.bounds import (
    Seed,
    ThreadCount,
)

__all__ = [
    "ALARM_SIGNALS", "AlarmConfig", "ArithConfig", "AuditConfig", "CapabilityConfig", "CurriculumConfig", "CurriculumSource", "DataConfig",
    "CorruptionConfig", "EvaluationConfig", "ExperimentConfig", "GenerationConfig", "LoraConfig", "ModelConfig",
    "ObjectiveConfig", "ReportConfig", "RewardsConfig", "Section", "TinyModelConfig", "TrainerConfig",
    "TruncationProbeConfig", "VerifierConfig", "VerifierMember", "WarmstartConfig",
]


# --------------------------------------------------------------------------- storage / tracking


class StorageConfig(Section):
    cache_dir: FolderPath = "cache"
    """Runtime root. Relative runtime paths (datasets, models, runs, eval, logs) resolve under it."""
    runs_dir: FolderPath = "artifacts/runs"
    """Folder of training run folders (`<runs_dir>/<run name>/`), under cache_dir when relative. A
    second pipeline stage that trains (the root's clean reference) sets its own, so that each stage
    owns its DVC output."""


class TrackingConfig(Section):
    enabled: bool = True
    """Log to MLflow. When off, or when the store is unreachable, everything is still written locally."""
    experiment_name: ExperimentName = "hackable-rl"
    """MLflow experiment that every run of this project logs into."""
    run_name: FolderName | None = None
    """MLflow run name and run folder name (one folder name: no `/`, no `..`); null derives
    `<method>-<channel>-r<rate>-s<seed>` from the config."""
    registered_model_name: ModelName = "hackable-rl-policy"
    """Model Registry name stem: `eval --run-id` registers an evaluated permanent checkpoint of a clean
    run (corruption.rate 0) as a version of `<name>-clean`, of a corrupted run of `<name>-corrupted`."""
    log_generation_tables: bool = True
    """Log the generation records to MLflow: a trace per step (a span per completion), a table per 50 steps."""
    log_system_metrics: bool = True
    """Log MLflow's system metrics (CPU, memory, disk, network; `system/*`) when psutil is installed."""


# --------------------------------------------------------------------------- the experiment


class ExperimentConfig(Section):
    seed: Seed = 0
    """Seeds Python, NumPy, torch, data generation and (unless overridden) corruption: in [0, 2**32 - 1]."""
    torch_threads: ThreadCount | None = None
    """CPU threads torch uses in this process (null: torch's default, one per core). Two runs side by
    side on 2 cores want 1 each; oversubscribing threads is far slower than running one at a time."""
    method: str = "baseline"
    """What training optimises: a registered method (`hackable-rl validate` lists them) or
    `package.module:method`."""
    method_kwargs: dict[str, Any] = {}
    """The method's own settings, checked against its settings model when the config's names resolve
    (docs/methodology.md lists the built-ins')."""
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
    evaluation: EvaluationConfig = EvaluationConfig()
    """Independent held-out evaluation."""
    capability: CapabilityConfig = CapabilityConfig()
    """The capability gate before GRPO on a pretrained model."""
    report: ReportConfig = ReportConfig()
    """Study report."""
    alarm: AlarmConfig = AlarmConfig()
    """The hacking-onset alarm during training."""

    @model_validator(mode="after")
    def _workers_fit(self) -> ExperimentConfig:
        workers = self.evaluation.workers
        if workers > 1 and (not self.generation.drop_finished_rows or self.generation.stop):
            raise ValueError(f"evaluation.workers: {workers} side-by-side decodes need generation.drop_finished_rows: "
                             "true and no generation.stop (that decoder gives each thread its own draws)")
        if workers > 1 and self.torch_threads is not None and workers > self.torch_threads:
            raise ValueError(f"evaluation.workers: {workers} exceeds torch_threads = {self.torch_threads}; each "
                             "worker needs at least one of torch's threads")
        if self.evaluation.common_prefix_first and not (self.evaluation.share_prompt_prefix
                                                        and self.generation.drop_finished_rows):
            raise ValueError("evaluation.common_prefix_first: true needs evaluation.share_prompt_prefix: true and "
                             "generation.drop_finished_rows: true (that decoder numbers positions from the mask)")
        return self

    @model_validator(mode="after")
    def _audit_fits_a_step(self) -> ExperimentConfig:
        if (k := self.alarm.audit.k) is not None and k > (completions := self.trainer.effective_batch_size):
            raise ValueError(f"alarm.audit.k: {k} is more than the {completions} completions of a step "
                             "(trainer.effective_batch_size); audit at most that many")
        return self

    @model_validator(mode="after")
    def _completions_fit_the_tiny_policy(self) -> ExperimentConfig:
        context = self.model.tiny.max_position_embeddings
        if self.model.source == "tiny" and self.generation.max_new_tokens >= context:
            raise ValueError(f"generation.max_new_tokens: {self.generation.max_new_tokens} does not fit the tiny "
                             f"policy's context of {context} positions (model.tiny.max_position_embeddings), prompt "
                             "included; lower it")
        return self

    @model_validator(mode="after")
    def _checkpoint_steps_saved(self) -> ExperimentConfig:
        saved = {*self.trainer.permanent_steps, self.trainer.max_steps}
        unsaved = [step for step in self.evaluation.checkpoint_steps if step not in saved]
        if unsaved:
            raise ValueError(f"evaluation.checkpoint_steps: {unsaved} are not saved for good; list them in "
                             f"trainer.permanent_steps (now {self.trainer.permanent_steps}) or lower them to "
                             f"trainer.max_steps {self.trainer.max_steps}")
        return self

    @property
    def corruption_seed(self) -> int:
        return self.seed if self.corruption.seed is None else self.corruption.seed

    @property
    def warmstart_seed(self) -> int:  # `warmstart.seed`, else the pipeline seed
        return self.seed if self.warmstart.seed is None else self.warmstart.seed

    @property
    def run_name(self) -> str:
        """The configured run name, or one derived from method, channel, rate (`corruption.label`) and seed."""
        if self.tracking.run_name:
            return self.tracking.run_name
        return f"{self.method}-{self.corruption.channel}-{self.corruption.label}-s{self.seed}"

    @property
    def condition(self) -> str:
        """`clean` when the training verifier is not corrupted (corruption.rate 0), else `corrupted`."""
        return "clean" if self.corruption.rate == 0 else "corrupted"

    @property
    def registered_model(self) -> str:
        """The Model Registry name of this run's checkpoints once evaluated: clean and corrupted runs
        never share one (nor, therefore, a `champion` alias)."""
        return f"{self.tracking.registered_model_name}-{self.condition}"
