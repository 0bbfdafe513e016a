"""Adds the machine record to committed result files written before stages recorded it.

Every model-running stage now writes `machine` (`core.numerics.machine_record`) into condition.json,
eval.json, warmstart.json and payoff.json (the payoff stage samples the base policy for honest work). The files committed before that get the record from the source that
holds it, marked `recorded_afterwards_from` with that source:

- a condition whose training run's MLflow store is in this checkout: the run's `environment.json`
  (its CPU dispatch record and torch version);
- otherwise what the project's results docs recorded when the study ran (each study's heading in
  docs/results.md names its CPU and whether it had avx512f; the natural study lists which stages ran
  on which of its two CPUs; docs/reproducibility.md names the main job's);
- otherwise `"machine not recorded"`.

A file that already has the record is left alone. Run from the repository root; then bring each
dvc.lock's hashes of the rewritten outputs in step (`dvc commit` where the stage's deps are present).

    python scripts/record_machines.py [--dry-run]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

KEY = "machine"
NOT_RECORDED = "machine not recorded"
WITHOUT_AVX512 = {"cpu": "2-core AMD EPYC", "flags": {"avx512f": "no"}}
WITH_AVX512 = {"cpu": "2-core AMD EPYC", "flags": {"avx512f": "yes"}}
DOCUMENTED = {
    "metrics": ("docs/reproducibility.md ('the machine that made the committed metrics/')",
                {"cpu": "2-core AMD EPYC (family 23)", "flags": {"avx512f": "no"}}),
    "pipelines/flawed_verifier": ("docs/results.md ('Blind spots ...', its heading)", WITHOUT_AVX512),
    "pipelines/corruption_sweep": ("docs/results.md ('The J sweep ...', its heading)", WITH_AVX512),
    "pipelines/smollm2_study": ("docs/results.md ('The real pretrained model's study', its heading)", WITH_AVX512),
    "pipelines/natural_dr_grpo": ("docs/results.md ('Natural blind spots: the length control', its heading: the "
                                  "machine its lanes ran on)", {"cpu": "AMD EPYC (family 25, model 17)",
                                  "flags": {"avx2": "yes", "avx512f": "yes", "avx512_bf16": "yes", "amx_bf16": "no"}}),
}
DOCUMENTED["benchmarks/equal_results"] = ("docs/results.md ('**Equal results**', its first line)", WITH_AVX512)
PILOT = ("machine not recorded: a validation pilot run before stages recorded their machine, on a CPU the "
         "docs do not name")
NATURAL = "pipelines/natural_hacking"
NATURAL_SOURCE = "docs/results.md ('Natural blind spots ...': which stages ran on which CPU)"


def documented(path: Path) -> tuple[str, dict] | None:
    """(source, record) the results docs give for the file, or None."""
    text = path.as_posix()
    if text.startswith(NATURAL):
        # warm starts, payoff, base and the k1/k2 cells without avx512f; k3 and the references with it
        on_avx512 = "/results/k3/" in text and "/base-" not in text or "/results/reference/" in text
        return NATURAL_SOURCE, WITH_AVX512 if on_avx512 else WITHOUT_AVX512
    for prefix, (source, record) in DOCUMENTED.items():
        if text.startswith(prefix + "/"):
            return source, record
    return None


def from_mlflow(path: Path, data: dict) -> dict | None:
    """The training run's environment record, where the study's MLflow store holds it."""
    run_id = data.get("run_id")
    study = next((parent for parent in path.parents if (parent / "study.yaml").is_file()), None)
    if not run_id or study is None:
        return None
    environment = study / "cache" / "mlflow" / "artifacts" / str(run_id) / "artifacts" / "environment.json"
    if not environment.is_file():
        return None
    recorded = json.loads(environment.read_text())
    hardware = recorded.get("hardware") or {}
    dispatch = hardware.get("cpu_dispatch") or {}
    return {"recorded_afterwards_from": f"MLflow run {run_id}: environment.json",
            "flags": {"avx512f": dispatch.get("cpu_has_avx512f")}, "dispatch": dispatch,
            "torch_threads": None, "torch": (recorded.get("packages") or {}).get("torch"),
            "cpu_count": hardware.get("cpu_count")}


def record_for(path: Path, data: dict) -> object:
    if "/pilots/" in path.as_posix():
        return PILOT
    found = from_mlflow(path, data)
    if found is not None:
        return found
    documented_record = documented(path)
    if documented_record is not None:
        source, record = documented_record
        return {"recorded_afterwards_from": source, **record}
    return NOT_RECORDED


def result_files(root: Path) -> list[Path]:
    files = [*root.glob("pipelines/*/results/**/condition.json"), *root.glob("pipelines/*/metrics/warmstart/*/warmstart.json"),
             *root.glob("metrics/warmstart/*/warmstart.json"), *root.glob("metrics/*/s*/eval.json"),
             *root.glob("pipelines/*/pilots/**/condition.json"), *root.glob("benchmarks/**/condition.json"),
             *root.glob("pipelines/*/results/payoff.json"), *root.glob("metrics/*/s*/train.json"),
             *root.glob("benchmarks/**/bf16.json"), *root.glob("pipelines/*/pilots/**/errors.json")]
    return sorted(set(files))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true")
    options = parser.parse_args()
    written = {}
    for path in result_files(Path(".")):
        data = json.loads(path.read_text())
        if KEY in data:
            continue
        data[KEY] = record_for(path, data)
        source = data[KEY] if isinstance(data[KEY], str) else data[KEY]["recorded_afterwards_from"]
        written[source] = written.get(source, 0) + 1
        if not options.dry_run:
            path.write_text(json.dumps(data, indent=2) + "\n")
    for source, count in sorted(written.items()):
        print(f"{count:5d}  {source}")


if __name__ == "__main__":
    main()
