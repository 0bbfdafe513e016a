"""Model Registry: find the version of a run's permanent checkpoint, record its evaluation, and move
an alias onto it.

A run's checkpoints are versions of `<stem>-clean` or `<stem>-corrupted` (`ExperimentConfig.registered_model`,
stem `tracking.registered_model_name`); they are found by run id, so the config that looks them up
need not have the run's corruption rate.
"""

from __future__ import annotations

import re
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.runs import check_run_id
from hackable_rl.tracking.store import masked_uri
from hackable_rl.tracking.tracker import make_client

EVALUATED_TAG = "independent_eval"


def _versions_of_run(client: Any, stem: str, run_id: str) -> list[Any]:
    """The run's versions under any name of the stem (`<stem>-clean`, `<stem>-corrupted`, or `<stem>`
    itself for runs registered before the names were split)."""
    return [v for v in client.search_model_versions(f"run_id = '{run_id}'") if v.name.startswith(stem)]


def find_version(client: Any, stem: str, run_id: str, step: int | None) -> Any:
    """The registered version of `run_id` at `step` (the latest step when None)."""
    versions = _versions_of_run(client, stem, run_id)
    if not versions:
        raise UserError(f"run {run_id}: no version of registered model {stem!r}-* (did training finish a checkpoint?)")
    by_step = {int(v.tags.get("step", -1)): v for v in versions}
    if step is None:
        return by_step[max(by_step)]
    if step not in by_step:
        raise UserError(f"run {run_id}: no registered checkpoint at step {step}; registered steps: {sorted(by_step)}")
    return by_step[step]


def mark_evaluated(
    config: Any, run_id: str, step: int | None, metrics_uri: str, metrics: dict[str, Any], summary: str
) -> str | None:
    """Tags the version as independently evaluated (promotion requires it), tags it with the numeric
    eval metrics (`eval.<name>`) and adds `summary` to its description; returns its version number."""
    client, _ = make_client(config.storage.cache_dir)
    if client is None:
        return None
    version = find_version(client, config.tracking.registered_model_name, run_id, step)
    client.set_model_version_tag(version.name, version.version, EVALUATED_TAG, metrics_uri)
    for key, value in metrics.items():
        client.set_model_version_tag(version.name, version.version, f"eval.{key}", str(value))
    first_line = (version.description or "").split("\n", 1)[0]
    client.update_model_version(version.name, version.version, description=f"{first_line}\n\n{summary}".strip())
    move_best_alias(client, version.name, version.tags.get("condition"))
    return str(version.version)


BEST_METRIC = "eval.pass_at_1"


def best_alias(condition: str) -> str:
    """`best-clean`, `best-corrupted`: the alias of a condition's best evaluated checkpoint."""
    return f"best-{condition}"


def move_best_alias(client: Any, name: str, condition: str | None) -> None:
    """Points `best-<condition>` at the evaluated version of `name` in `condition` with the highest
    pass@1 (the earlier version on a tie); unevaluated versions never hold it."""
    if not condition:
        return
    scored = [
        (float(v.tags[BEST_METRIC]), -int(v.version), v.version)
        for v in client.search_model_versions(f"name = '{name}'")
        if v.tags.get("condition") == condition and EVALUATED_TAG in v.tags and BEST_METRIC in v.tags
    ]
    if scored:
        client.set_registered_model_alias(name, best_alias(condition), max(scored)[2])


def promote(config: Any, run_id: str, step: int | None, alias: str, force: bool) -> dict[str, Any]:
    """Moves `alias` to the run's checkpoint version; refuses an unevaluated one unless `force`."""
    check_alias(alias)
    check_run_id(run_id)
    client, uri = make_client(config.storage.cache_dir)
    if client is None:
        raise UserError(f"MLflow store {masked_uri(uri)} is unreachable; cannot promote")
    version = find_version(client, config.tracking.registered_model_name, run_id, step)
    name = version.name
    if EVALUATED_TAG not in version.tags and not force:
        raise UserError(
            f"{name} version {version.version} (run {run_id}, step {version.tags.get('step')}) has no independent "
            f"evaluation; run `hackable-rl eval --run-id {run_id} --step {version.tags.get('step')}` first, "
            "or pass --force"
        )
    client.set_registered_model_alias(name, alias, version.version)
    return {"name": name, "version": version.version, "alias": alias, "step": version.tags.get("step")}


# MLflow's own rules for an alias (mlflow.utils.validation): letters, digits, `_` and `-`, at most 255
# characters, not `latest` and not a version alias such as `v3`. Checked before the store is opened.
_ALIAS = re.compile(r"[\w-]{1,255}")
_VERSION_ALIAS = re.compile(r"[vV]\d+")


def check_alias(alias: str) -> None:
    """A UserError naming --alias for a name the Model Registry would refuse."""
    if not _ALIAS.fullmatch(alias):
        raise UserError(f"--alias {alias!r}: expected 1 to 255 letters, digits, '_' or '-' (e.g. champion)")
    if alias.lower() == "latest" or _VERSION_ALIAS.fullmatch(alias):
        raise UserError(f"--alias {alias!r}: reserved by the Model Registry ('latest' and v<N> name versions)")


def registered_steps(client: Any, stem: str, run_id: str) -> list[int]:
    """Steps of every permanent checkpoint a run registered, ascending."""
    steps = sorted(int(v.tags["step"]) for v in _versions_of_run(client, stem, run_id) if "step" in v.tags)
    if not steps:
        raise UserError(f"run {run_id}: no version of registered model {stem!r}-*")
    return steps
