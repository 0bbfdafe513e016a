"""What are a policy's wrong answers? Each judged-wrong sample of an evaluation, classified by the
pattern its boxed answer fits (`hackable_rl.evaluation.error_patterns`): the distribution the
natural flaws are chosen from (docs/studies.md, "Natural blind spots").

    hackable-rl eval --base --set evaluation.split=validation --set evaluation.n=8 --out-dir OUT
    .venv/bin/python benchmarks/bench_error_patterns.py --generations OUT/generations.jsonl \\
        --split validation [--config params.yaml] [--out errors.json]

Prints the classes, most frequent first, and writes the counts (by class, every pattern each wrong
answer fits, per chain length) as JSON with `--out`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hackable_rl.config.loading import load_config
from hackable_rl.core.errors import UserError
from hackable_rl.core.jsonl import write_json
from hackable_rl.core.numerics import MACHINE_KEY, machine_record
from hackable_rl.data.prepare import read_prepared
from hackable_rl.evaluation.error_patterns import classify_generations, format_errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=Path, required=True, help="an eval's generations.jsonl")
    parser.add_argument("--split", help="the prepared split they were drawn from (default: evaluation.split)")
    parser.add_argument("--config", type=Path, default=Path("params.yaml"))
    parser.add_argument("--out", type=Path, help="where the counts go (JSON)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        rows = read_prepared(config, args.split or config.evaluation.split)
        counts = classify_generations(args.generations, rows, (config.rewards.think_open, config.rewards.think_close))
    except UserError as error:  # a missing file or a broken row: one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(format_errors(counts)))
    if args.out is not None:
        print(f"written to {write_json(args.out, {**counts.to_json(), MACHINE_KEY: machine_record()})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
