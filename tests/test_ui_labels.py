"""What the UI shows of evaluations and the registry: one point per evaluated step, the base
evaluation's labels, `best-<condition>` aliases, one version per evaluated checkpoint, and no
absolute paths in version descriptions."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from hackable_rl.tracking import Tracker
from hackable_rl.tracking.descriptions import eval_description
from hackable_rl.tracking.models_registry import (
    ABANDONED_TAG,
    EVALUATED_TAG,
    move_best_alias,
    register_checkpoint,
)
from hackable_rl.tracking.versions import CheckpointVersion
from hackable_rl.training.identity import _shown


def _client(tmp_path: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")


def test_a_point_logged_again_at_the_same_step_and_time_is_stored_once(tmp_path):
    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    tracker = Tracker(client, run_id, None, client.tracking_uri)
    stamp = tracker.start_time_ms() + 50
    for _ in range(2):
        tracker.log_metrics({"eval_pass_at_1": 0.625}, step=50, timestamp_ms=stamp)
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "eval_pass_at_1")] == [(50, 0.625)]


@pytest.mark.skipif(importlib.util.find_spec("psutil") is None, reason="MLflow samples system metrics with psutil")
def test_a_run_shorter_than_the_sampling_interval_still_has_its_system_metrics(tmp_path):
    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    tracker = Tracker(client, run_id, None, client.tracking_uri)
    tracker.start_system_metrics(resumed=False)
    tracker.end()  # well inside MLflow's 10 s interval
    metrics = client.get_run(run_id).data.metrics
    assert "system/cpu_utilization_percentage" in metrics, sorted(metrics)


def test_the_best_alias_of_a_condition_is_its_evaluated_version_with_the_highest_pass_at_1(tmp_path):
    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.create_registered_model("p-corrupted")
    evaluated = {EVALUATED_TAG: "eval/step-1/metrics.json", "condition": "corrupted"}
    for tags in ({**evaluated, "eval.pass_at_1": "0.5"}, {**evaluated, "eval.pass_at_1": "0.75"},
                 {"condition": "corrupted", "eval.pass_at_1": "0.9"}):  # the last one is not evaluated
        client.create_model_version("p-corrupted", source=f"{client.get_run(run_id).info.artifact_uri}/x",
                                    run_id=run_id, tags=tags)
    move_best_alias(client, "p-corrupted", "corrupted")
    assert str(client.get_model_version_by_alias("p-corrupted", "best-corrupted").version) == "2"


class _RivalSetsTheAliasFirst:
    """A client whose first alias write loses a race: another evaluation (which read before this one's
    version was tagged) inserts the alias at its stale best just before, and the store refuses the
    second insert, as PostgreSQL did under two `dvc queue` workers."""

    def __init__(self, client: MlflowClient, stale_version: str):
        self._client, self._stale, self.refused = client, stale_version, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def set_registered_model_alias(self, name, alias, version):
        if not self.refused:
            self._client.set_registered_model_alias(name, alias, self._stale)
            self.refused += 1
            raise MlflowException(f"Key (name, alias)=({name}, {alias}) already exists")
        self._client.set_registered_model_alias(name, alias, version)


def test_the_best_alias_lands_on_the_best_version_when_a_concurrent_evaluation_set_it_first(tmp_path):
    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.create_registered_model("p-corrupted")
    for score in ("0.5", "0.75"):
        client.create_model_version("p-corrupted", source=f"{client.get_run(run_id).info.artifact_uri}/x",
                                    run_id=run_id, tags={EVALUATED_TAG: "m.json", "condition": "corrupted",
                                                         "eval.pass_at_1": score})
    racing = _RivalSetsTheAliasFirst(client, stale_version="1")
    move_best_alias(racing, "p-corrupted", "corrupted")
    assert racing.refused == 1
    assert str(client.get_model_version_by_alias("p-corrupted", "best-corrupted").version) == "2"


def test_a_checkpoint_is_registered_once_from_its_version_json_and_anew_once_abandoned(tmp_path):
    """The version of a logged checkpoint: created from its `version.json` (the run id set, though
    the run trained offline and did not know it), found again on a second evaluation, and created
    anew when a resume abandoned the first one (the step was trained again)."""
    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    folder = tmp_path / "step-4"
    folder.mkdir()
    (folder / "checkpoint.json").write_text("{}")
    version = CheckpointVersion.of("p-corrupted", {"run_id": None, "condition": "corrupted", "step": 4}, "Step 4.")
    tracker = Tracker(client, run_id, None, client.tracking_uri)
    assert tracker.log_checkpoint(folder, "checkpoints/permanent/step-4", version)
    assert client.search_model_versions(f"run_id = '{run_id}'") == []  # logging registers nothing

    first = register_checkpoint(client, "p", run_id, 4)
    assert (first.name, first.description) == ("p-corrupted", "Step 4.")
    assert first.source == f"{client.get_run(run_id).info.artifact_uri}/checkpoints/permanent/step-4"
    assert first.tags == {"run_id": run_id, "condition": "corrupted", "step": "4"}
    assert register_checkpoint(client, "p", run_id, 4).version == first.version
    client.set_model_version_tag("p-corrupted", first.version, ABANDONED_TAG, "resumed from step 2")
    assert int(register_checkpoint(client, "p", run_id, 4).version) == int(first.version) + 1


def test_the_base_evaluation_is_described_without_a_step():
    text = eval_description({"split": "test", "step": None, "pass_at_1": 0.5}, "eval/base")
    assert text.startswith("Split test, the policy before any RL (no checkpoint step).")
    assert "step None" not in eval_description({"split": "test", "step": None}, "eval/base")


def test_a_policy_inside_the_working_directory_is_named_by_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _shown(f"tiny:{tmp_path / 'cache/models/tiny'}") == "tiny:cache/models/tiny"
    assert _shown("hf:HuggingFaceTB/SmolLM2-135M@abc") == "hf:HuggingFaceTB/SmolLM2-135M@abc"
    assert _shown("tiny:/elsewhere/model") == "tiny:/elsewhere/model"


class _RivalWritesTheViewFirst:
    """A client whose first experiment-tag write loses a race: a run started beside it inserted the
    same tag just before, and the store refuses the second insert (PostgreSQL's unique key)."""

    def __init__(self, client: MlflowClient):
        self._client, self.refused = client, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def set_experiment_tag(self, experiment_id, key, value):
        self._client.set_experiment_tag(experiment_id, key, value)
        if not self.refused:
            self.refused += 1
            raise MlflowException("duplicate key value violates unique constraint experiment_tags_pkey")


def test_a_runs_view_written_by_a_run_started_beside_this_one_is_not_an_error(tmp_path):
    from hackable_rl.tracking.views import _VIEW_TAG, runs_view_state, set_runs_view

    client = _client(tmp_path)
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    racing = _RivalWritesTheViewFirst(client)
    set_runs_view(racing, experiment)
    assert racing.refused == 1
    assert json.loads(client.get_experiment(experiment).tags[_VIEW_TAG]) == runs_view_state()
