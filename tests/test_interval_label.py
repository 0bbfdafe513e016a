"""A study's intervals are labelled by what ran (the warm starts its result stages read, from
dvc.lock), not by what its params.yaml declares now."""

from __future__ import annotations

import yaml

from hackable_rl.report.conditions import ONE_WARM_START, OWN_WARM_STARTS, interval_label, warm_starts_read


def _study(tmp_path, models: list[str], declared_seed: int | None):
    stages = {f"condition@c-baseline-{seed}": {"cmd": "hackable-rl condition",
                                               "deps": [{"path": model, "md5": "x.dir"}, {"path": "results/payoff.json"}],
                                               "outs": [{"path": f"results/c/baseline-s{seed}"}]}
              for seed, model in enumerate(models)}
    stages["warmstart"] = {"cmd": "hackable-rl warmstart", "deps": [{"path": "cache/datasets/arith"}],
                           "outs": [{"path": "cache/models/tiny-arith-w9"}]}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"warmstart": {"seed": declared_seed}}))
    (tmp_path / "results").mkdir()
    return tmp_path / "results"


def test_results_from_one_warm_start_read_as_conditional_on_it_whatever_params_declares(tmp_path):
    results = _study(tmp_path, ["cache/models/tiny-arith"] * 3, declared_seed=None)
    assert warm_starts_read(tmp_path / "dvc.lock") == {"cache/models/tiny-arith"}
    assert interval_label(results) == ONE_WARM_START


def test_results_from_a_warm_start_per_replicate_read_as_across_them(tmp_path):
    results = _study(tmp_path, [f"cache/models/tiny-arith-w{seed}" for seed in range(3)], declared_seed=0)
    assert interval_label(results) == OWN_WARM_STARTS


def test_without_a_lock_the_declaration_decides(tmp_path):
    results = _study(tmp_path, [], declared_seed=None)
    (tmp_path / "dvc.lock").unlink()
    assert interval_label(results) == OWN_WARM_STARTS
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"warmstart": {"seed": 0}}))
    assert interval_label(results) == ONE_WARM_START
