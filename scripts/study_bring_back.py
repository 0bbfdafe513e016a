"""Brings a study worktree's finished conditions back into the checkout (scripts/study_worktree.sh).

A study that spans sessions runs in its own worktree; each finished condition's folder, each warm start's
metrics and the stages dvc.lock records for them belong in the checkout's git. This copies every result
folder and every file under metrics/ the worktree has and the checkout lacks (or holds otherwise), then
merges the two dvc.lock files: the worktree's entry for each stage it records (it ran them), the
checkout's for stages only the checkout records (stages added on the checkout after the worktree was made,
such as a comparison with another study). Then commit.

    python scripts/study_bring_back.py ../smollm2_learning-3125c15/pipelines/smollm2_learning \\
        pipelines/smollm2_learning [--dry-run]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from dvc.utils.serialize import dump_yaml, load_yaml  # DVC's own YAML: the lock keeps its layout

from hackable_rl.study.records import CONDITION_FILE


def _differs(ours: Path, theirs: Path) -> bool:
    """The checkout lacks the worktree's file, or holds other bytes."""
    return not ours.is_file() or ours.read_bytes() != theirs.read_bytes()


def finished_folders(worktree_study: Path, checkout_study: Path) -> list[Path]:
    """Result folders (relative to the study folder) whose condition.json the checkout lacks or differs from."""
    conditions = sorted((worktree_study / "results").rglob(CONDITION_FILE))
    return [c.parent.relative_to(worktree_study) for c in conditions
            if _differs(checkout_study / c.relative_to(worktree_study), c)]


def changed_metrics(worktree_study: Path, checkout_study: Path) -> list[Path]:
    """Files under metrics/ (a warm start's warmstart.json, ...) the checkout lacks or holds otherwise."""
    files = [path for path in sorted((worktree_study / "metrics").rglob("*")) if path.is_file()]
    return [f.relative_to(worktree_study) for f in files if _differs(checkout_study / f.relative_to(worktree_study), f)]


def merged_lock(worktree_lock: dict, checkout_lock: dict) -> dict:
    """The worktree's stages, then those only the checkout records, in the checkout's order where it has them."""
    theirs, ours = worktree_lock.get("stages", {}), checkout_lock.get("stages", {})
    order = list(ours) + [name for name in theirs if name not in ours]
    return {**checkout_lock, "stages": {name: theirs.get(name, ours.get(name)) for name in order}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("worktree_study", type=Path, help="The study's folder in the worktree.")
    parser.add_argument("checkout_study", type=Path, help="The same study's folder in the checkout.")
    parser.add_argument("--dry-run", action="store_true", help="Say what would be copied; change nothing.")
    args = parser.parse_args(argv)
    for folder in (args.worktree_study, args.checkout_study):
        if not (folder / "dvc.lock").is_file():
            print(f"error: {folder}: no dvc.lock there (a study folder is where its dvc.yaml and dvc.lock are)",
                  file=sys.stderr)
            return 2
    folders = finished_folders(args.worktree_study, args.checkout_study)
    for folder in folders:
        print(f"{'would copy' if args.dry_run else 'copying'} {folder}")
        if not args.dry_run:
            target = args.checkout_study / folder
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(args.worktree_study / folder, target)
    metrics = changed_metrics(args.worktree_study, args.checkout_study)
    for path in metrics:
        print(f"{'would copy' if args.dry_run else 'copying'} {path}")
        if not args.dry_run:
            (args.checkout_study / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(args.worktree_study / path, args.checkout_study / path)
    lock = merged_lock(load_yaml(args.worktree_study / "dvc.lock"), load_yaml(args.checkout_study / "dvc.lock"))
    if not args.dry_run:
        dump_yaml(args.checkout_study / "dvc.lock", lock)
    print(f"{len(folders)} result folder(s), {len(metrics)} metrics file(s); dvc.lock merged ({len(lock['stages'])} stages)"
          + (" (dry run: nothing written)" if args.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
