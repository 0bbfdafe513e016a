"""`hackable-rl compare`'s named policies and pairs: `--policy NAME=DIR[,DIR...]` and `--pair A:B`
parsed, and every pair compared on every metric both policies have (`evaluation.paired`), Holm over
the pairs' pass@1."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hackable_rl.core.errors import UserError
from hackable_rl.evaluation.paired import PRIMARY_FAMILY, Comparison, check_margin, compare, with_holm
from hackable_rl.evaluation.prompt_results import PROMPTS_FILE, PromptResult, read_prompt_results

__all__ = ["compare_named", "parse_pairs", "parse_policies"]


# compare.json's entry for a pair is named `<a>_vs_<b>` (pass@1, the headline); the other metrics
# follow as `<a>_vs_<b>_<suffix>`.
_SUFFIXES = {"pass_at_1": "", "greedy_accuracy": "_greedy", "hacking_gap": "_gap", "pass_at_1_transfer": "_transfer"}


def parse_policies(values: Sequence[str]) -> dict[str, list[Path]]:
    """`compare --policy NAME=DIR[,DIR...]` values as name -> evaluation folders."""
    named = {}
    for value in values:
        name, _, folders = value.partition("=")
        if not name or not folders:
            raise UserError(f"compare --policy {value!r}: expected NAME=DIR[,DIR...]")
        named[name] = [Path(folder) for folder in folders.split(",")]
    return named


def check_out_beside_inputs(out: Path, policies: dict[str, list[Path]]) -> None:
    """`compare --out` must not land inside a folder it reads (it would overwrite a policy's prompts.jsonl
    or eval.json, or sit among its inputs): a UserError naming the policy and its folder."""
    target = Path(out).resolve()
    for name, folders in policies.items():
        for folder in folders:
            if target.is_relative_to(Path(folder).resolve()):
                raise UserError(f"compare --out {out}: inside policy {name}'s folder {folder}, which compare reads; "
                                "write it elsewhere (default metrics/compare.json)")


def parse_pairs(values: Sequence[str]) -> list[tuple[str, str]]:
    """`compare --pair A:B` values as (A, B) pairs."""
    pairs = []
    for value in values:
        a, _, b = value.partition(":")
        if not a or not b:
            raise UserError(f"compare --pair {value!r}: expected A:B, e.g. clean:base")
        pairs.append((a, b))
    return pairs


def compare_named(
    policies: Mapping[str, Sequence[Path]], pairs: Sequence[tuple[str, str]], seed: int = 0,
    margin: float | None = None,
) -> dict[str, Comparison]:
    """Every `(a, b)` pair on every metric both have, each with its equivalence test when a `margin`
    is given; `policies` maps a name to its evaluation folders (one per training seed, each holding
    prompts.jsonl)."""
    if margin is not None:
        check_margin(margin, "compare --margin")
    for a, b in pairs:
        for name in (a, b):
            if name not in policies:
                raise UserError(f"compare --pair {a}:{b}: no --policy named {name!r} (have: {', '.join(policies)})")
    results = {name: [read_prompt_results(Path(folder) / PROMPTS_FILE) for folder in folders]
               for name, folders in policies.items()}
    comparisons = {}
    for a, b in pairs:
        for metric, suffix in _SUFFIXES.items():
            if metric != "pass_at_1" and not (_defined(results[a], metric) and _defined(results[b], metric)):
                continue
            comparisons[f"{a}_vs_{b}{suffix}"] = compare(results[a], results[b], metric, seed, margin)
    return with_holm(comparisons, [f"{a}_vs_{b}" for a, b in pairs], PRIMARY_FAMILY)


def _defined(seeds: Sequence[Sequence[PromptResult]], metric: str) -> bool:
    return all(any(result.value(metric) is not None for result in results) for results in seeds)
