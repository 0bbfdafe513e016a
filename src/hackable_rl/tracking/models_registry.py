"""Model Registry: register a run's permanent checkpoint once it is evaluated, record the
evaluation, and move an alias onto it.

Training only logs each permanent checkpoint (`checkpoints/permanent/step-N`, with the
`version.json` of `tracking.versions`); `hackable-rl eval --run-id` registers the checkpoint it
evaluated as a version of `<stem>-clean` or `<stem>-corrupted` (`ExperimentConfig.registered_model`,
stem `tracking.registered_model_name`), so the registry holds evaluated checkpoints only (and those
`promote --force` put there). Versions are found by run id and step, so the config that looks them
up need not have the run's corruption rate; evaluating a checkpoint again updates its version.
"""

from __future__ import annotations

import re
import time
from typing import Any

from hackable_rl.core.errors import UserError
from hackable_rl.tracking.client_calls import create_model_version
from hackable_rl.tracking.opening import make_client
from hackable_rl.tracking.runs import check_run_id, checkpoint_step, fetch_run, read_checkpoint_version
from hackable_rl.tracking.store import masked_uri
from hackable_rl.tracking.versions import checkpoint_artifact

EVALUATED_TAG = "independent_eval"
ABANDONED_TAG = "abandoned"  # a version of a checkpoint whose steps a resume trained again


def _versions_of_run(client: Any, stem: str, run_id: str) -> list[Any]:
    """The run's versions under any name of the stem (`<stem>-clean`, `<stem>-corrupted`, or `<stem>`
    itself for runs registered before the names were split)."""
    return [v for v in client.search_model_versions(f"run_id = '{run_id}'") if v.name.startswith(stem)]


def _version_at(client: Any, stem: str, run_id: str, step: int) -> Any | None:
    """The registered version of the run's checkpoint at `step`, or None while it has none (it was
    never evaluated). Versions of an abandoned checkpoint do not count: the step was trained again."""
    found = [v for v in _versions_of_run(client, stem, run_id)
             if v.tags.get("step") == str(step) and ABANDONED_TAG not in v.tags]
    return max(found, key=lambda v: int(v.version)) if found else None


def register_checkpoint(client: Any, stem: str, run_id: str, step: int) -> Any:
    """The version of the run's checkpoint at `step`: the one it has, else a new one registered from
    the checkpoint's artifact folder with the model, tags and description its `version.json` names."""
    existing = _version_at(client, stem, run_id, step)
    if existing is not None:
        return existing
    version = read_checkpoint_version(client, run_id, step)
    tags = {**version.tags, "run_id": run_id}  # a run trained offline got its run id only at sync
    number = create_model_version(client, run_id, version.model, checkpoint_artifact(step), tags, version.description)
    return client.get_model_version(version.model, number)


def mark_evaluated(
    config: Any, run_id: str, step: int, metrics_uri: str, metrics: dict[str, Any], summary: str
) -> str | None:
    """Registers the evaluated checkpoint (or finds its version), tags it as independently evaluated
    (promotion requires it) and with the numeric eval metrics (`eval.<name>`), adds `summary` to its
    description and moves `best-<condition>`; returns the version number (None: store unreachable)."""
    client, _ = make_client(config.storage.cache_dir)
    if client is None:
        return None
    version = register_checkpoint(client, config.tracking.registered_model_name, run_id, step)
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
    pass@1 (the earlier version on a tie); unevaluated versions never hold it.

    Several evaluations may finish at once (`seeds --parallel`, `dvc queue` workers) and each moves
    the alias from what it read. Setting it is an insert the store can refuse when another process
    inserted the same alias first, and a process that read before another's tags were written would
    point it at a stale best. So it reads, sets and reads again until the alias names the best it
    sees: the last process to read sees every version tagged before it, and leaves the alias right."""
    if not condition:
        return
    # deferred: mlflow is slow to import; a run with tracking off never loads it
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    alias = best_alias(condition)
    for _ in range(_ALIAS_ATTEMPTS):
        best = _best_evaluated(client, name, condition)
        if best is None or _alias_target(client, name, alias) == best:
            return
        try:
            client.set_registered_model_alias(name, alias, best)
        except (MlflowException, SQLAlchemyError):  # another process set it between our read and write: read again
            time.sleep(_ALIAS_RETRY_S)
    raise UserError(f"registered model {name!r}: alias {alias!r} kept changing under concurrent evaluations; "
                    f"rerun `hackable-rl eval` to set it")


_ALIAS_ATTEMPTS = 6
_ALIAS_RETRY_S = 0.2


def _best_evaluated(client: Any, name: str, condition: str) -> str | None:
    """The version of `name` in `condition` with the highest evaluated pass@1 (earlier on a tie)."""
    scored = [
        (float(v.tags[BEST_METRIC]), -int(v.version), str(v.version))
        for v in client.search_model_versions(f"name = '{name}'")
        if v.tags.get("condition") == condition and EVALUATED_TAG in v.tags and BEST_METRIC in v.tags
    ]
    return max(scored)[2] if scored else None


def _alias_target(client: Any, name: str, alias: str) -> str | None:
    """The version `alias` points at, or None while it points nowhere."""
    aliases = client.get_registered_model(name).aliases or {}
    target = aliases.get(alias)
    return None if target is None else str(target)


def promote(config: Any, run_id: str, step: int | None, alias: str, force: bool) -> dict[str, Any]:
    """Moves `alias` to the version of the run's checkpoint at `step` (the last one when None).
    An unevaluated checkpoint is refused unless `force`, which registers it first when needed."""
    check_alias(alias)
    check_run_id(run_id)
    client, uri = make_client(config.storage.cache_dir)
    if client is None:
        raise UserError(f"MLflow store {masked_uri(uri)} is unreachable; cannot promote")
    fetch_run(client, run_id)  # an unknown run id: "no such run", before its checkpoints are listed
    stem = config.tracking.registered_model_name
    step = checkpoint_step(client, run_id, step)
    version = _version_at(client, stem, run_id, step)
    if (version is None or EVALUATED_TAG not in version.tags) and not force:
        raise UserError(
            f"run {run_id}, step {step}: the checkpoint has no independent evaluation; run `hackable-rl eval "
            f"--run-id {run_id} --step {step}` first (it registers the checkpoint), or pass --force"
        )
    version = version or register_checkpoint(client, stem, run_id, step)
    client.set_registered_model_alias(version.name, alias, version.version)
    return {"name": version.name, "version": version.version, "alias": alias, "step": step}


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


def tag_abandoned_versions(client: Any, run_id: str, step: int) -> None:
    """On resume from checkpoint `step`: tags the run's versions of later checkpoints `abandoned`
    (the resumed run trains those steps again and logs their checkpoints anew); they are kept."""
    for version in client.search_model_versions(f"run_id = '{run_id}'"):
        if int(version.tags.get("step", -1)) > step:
            client.set_model_version_tag(version.name, version.version, ABANDONED_TAG, f"resumed from step {step}")
