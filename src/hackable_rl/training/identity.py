"""Who a training run is, assembled once: its name, method, corruption, seed, config and dataset
hashes, and the policy it starts from. The MLflow tags, run.json and the tags of every registered
checkpoint version are all views of this one record, so they cannot disagree.

Their keys are read back elsewhere (`hackable-rl eval` and `promote` look versions up by tag,
tests read run.json), so each view keeps its historical spelling: `corruption.rate` in tags,
`corruption_rate` in run.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hackable_rl.config.experiment import ExperimentConfig
from hackable_rl.core.storage import Storage, file_sha256
from hackable_rl.tracking.provenance import config_hash, dvc_experiment, dvc_lock_hash, git_state

if TYPE_CHECKING:
    from hackable_rl.models.loading import PolicySource


@dataclass(frozen=True)
class RunIdentity:
    run_name: str
    method: str
    condition: str  # clean | corrupted (`ExperimentConfig.condition`)
    corruption_channel: str
    corruption_rate: float
    seed: int
    config_hash: str  # sha256 of the resolved config
    dataset: str
    dataset_manifest_sha256: str | None  # None before `hackable-rl prepare` wrote a manifest
    model_source: str  # `model.source` as configured
    base_model: str  # the resolved starting policy: `kind:location`, `@pin` added where pinned

    @classmethod
    def of(cls, config: ExperimentConfig, policy: PolicySource) -> RunIdentity:
        """The identity of a run of `config` that starts from `policy` (`models.loading.resolve_policy`)."""
        return cls(
            run_name=config.run_name,
            method=config.method,
            condition=config.condition,
            corruption_channel=config.corruption.channel,
            corruption_rate=config.corruption.rate,
            seed=config.seed,
            config_hash=config_hash(config.model_dump(mode="json")),
            dataset=config.data.name,
            dataset_manifest_sha256=_manifest_hash(config),
            model_source=config.model.source,
            base_model=_policy_reference(policy),
        )

    def tags(self) -> dict[str, Any]:
        """The MLflow run's tags: the identity and the code it ran from (Git and DVC, read now)."""
        git = git_state()
        return {
            "method": self.method,
            "condition": self.condition,
            "corruption.channel": self.corruption_channel,
            "corruption.rate": self.corruption_rate,
            "seed": self.seed,
            "git_sha": git["git_sha"],
            "git_dirty": git["git_dirty"],
            "dvc_experiment": dvc_experiment(),
            "dvc_lock_sha256": dvc_lock_hash(),
            "config_hash": self.config_hash,
            "dataset": self.dataset,
            "dataset_manifest_sha256": self.dataset_manifest_sha256,
            "model.source": self.model_source,
        }

    def run_info(self) -> dict[str, Any]:
        """The identity fields of run.json."""
        return {
            "run_name": self.run_name,
            "config_hash": self.config_hash,
            "method": self.method,
            "corruption_rate": self.corruption_rate,
            "seed": self.seed,
            "base_model": self.base_model,
        }

    def version_tags(self, run_id: str | None) -> dict[str, Any]:
        """The tags of each checkpoint's registry version (the callback adds its `step`; evaluation
        registers the version, with the run id where the run trained offline)."""
        return {
            "run_id": run_id,
            "method": self.method,
            "condition": self.condition,
            "corruption.channel": self.corruption_channel,
            "corruption.rate": self.corruption_rate,
            "seed": self.seed,
            "run_name": self.run_name,
        }

    def version_description(self, step: int) -> str:
        """The first line of a checkpoint version's description (the evaluation that registers it adds
        its numbers)."""
        return (
            f"Step {step} of run {self.run_name}: {self.method}, training verifier {self.corruption_channel} "
            f"at rate {self.corruption_rate:g} ({self.condition}), seed {self.seed}, from {_shown(self.base_model)}."
        )


def _shown(reference: str) -> str:
    """A policy reference with a local path inside the working directory made relative to it: the
    registry is read on other machines and clones, where this machine's absolute path means nothing."""
    kind, _, location = reference.partition(":")
    path = Path(location)
    if not location or not path.is_absolute() or not path.is_relative_to(Path.cwd()):
        return reference
    return f"{kind}:{path.relative_to(Path.cwd())}"


def _policy_reference(source: PolicySource) -> str:
    """A readable identity of the starting policy: kind, location, and the pin where there is one."""
    pin = source.revision or source.gguf_file
    return f"{source.kind}:{source.location}" + (f"@{pin}" if pin else "")


def _manifest_hash(config: ExperimentConfig) -> str | None:
    manifest = Storage.of(config.storage).dataset_dir(config.data.name) / "manifest.json"
    if not manifest.exists():
        return None
    return file_sha256(manifest)
