"""How often does each judge extraction mode agree with the labels? (The measurement behind `auto`.)

1. MATH-500 (data/math500), labelled by its own `answer` field: every reference solution is judged
   against its own answer (label: correct) and against another problem's answer written differently
   (the first from half the set away; label: wrong), as written (the answer in `\\boxed{}`) and
   unboxed (the last `\\boxed{X}` replaced by `X`, so the answer is plain LaTeX such as `$X.$`).
   2,000 judgments per mode.
2. Optionally, math-verify's own regression cases (`tests/test_all.py` of the installed version,
   from its source distribution: `pip download math-verify==0.9.0 --no-deps --no-binary :all:`,
   then unpack): every `(gold, pred, expected)` of its parametrised tests, judged with `pred` as the
   completion and `gold` as the reference; beside them, math-verify's own `compare_strings` with
   its default configs (LaTeX then expressions), the figure the judge is compared with.

Run: `.venv/bin/python benchmarks/bench_judge_agreement.py [--math-verify-tests PATH/test_all.py]`.
Prints one JSON line per mode and data set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import time
from collections import Counter
from pathlib import Path

from hackable_rl.answers import mathverify
from hackable_rl.answers.parsing import extract_all_boxed
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.evaluation.judge import EXTRACT_MODES, judge_completion

DATA = Path(__file__).resolve().parents[1] / "data"  # the pinned data sets (data/README.md)
Case = tuple[str, str, str, bool]  # (group, completion, reference, label)


def _written_alike(answer: str) -> str:
    return "".join(answer.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").split())


def _unboxed(solution: str) -> str:
    last = extract_all_boxed(solution)[-1]
    start = solution.rindex("\\boxed{" + last + "}")
    return solution[:start] + last + solution[start + len("\\boxed{" + last + "}") :]


def math500_cases() -> list[Case]:
    rows = read_jsonl(DATA / "math500" / "test.jsonl")
    cases = []
    for index, row in enumerate(rows):
        partner = (index + len(rows) // 2) % len(rows)
        while _written_alike(rows[partner]["answer"]) == _written_alike(row["answer"]):
            partner = (partner + 1) % len(rows)
        for variant, completion in (("boxed", row["solution"]), ("unboxed", _unboxed(row["solution"]))):
            cases.append((f"{variant}/own", completion, row["answer"], True))
            cases.append((f"{variant}/other", completion, rows[partner]["answer"], False))
    return cases


def math_verify_cases(path: Path) -> tuple[list[Case], object]:
    spec = importlib.util.spec_from_file_location("math_verify_test_all", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = []
    for name in sorted(dir(module)):
        for mark in getattr(getattr(module, name), "pytestmark", []) if name.startswith("test_") else []:
            argnames = mark.args[0] if mark.name == "parametrize" else ""
            names = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
            if not {"gold", "pred", "expected"} <= set(names):
                continue
            for values in mark.args[1]:
                row = dict(zip(names, getattr(values, "values", values), strict=True))
                cases.append((name, row["pred"], row["gold"], bool(row["expected"])))
    return cases, module


def agreement(cases: list[Case], mode: str, decimal_comma: bool = False) -> dict:
    agree, total = Counter(), Counter()
    started = time.perf_counter()
    for group, completion, reference, label in cases:
        judgment = judge_completion(
            completion, reference, extract=mode, timeout_s=5.0, decimal_comma=decimal_comma
        )
        agree[group] += (judgment.correct is True) == label
        total[group] += 1
    return {
        "mode": mode + (" --decimal-comma" if decimal_comma else ""),
        "agree": sum(agree.values()),
        "of": sum(total.values()),
        "share": round(sum(agree.values()) / sum(total.values()), 4),
        "groups": {group: f"{agree[group]}/{total[group]}" for group in sorted(total)},
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math-verify-tests", type=Path, help="math-verify's tests/test_all.py (see above)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # math-verify warns on every unparseable candidate
    mathverify.math_verify_equal("x", "x", timeout_s=120.0)  # the worker's start-up is not judging time
    cases = math500_cases()
    for mode in EXTRACT_MODES:
        print(json.dumps({"data": "math500", **agreement(cases, mode)}), flush=True)
    if args.math_verify_tests:
        cases, module = math_verify_cases(args.math_verify_tests)
        own = sum(bool(module.compare_strings(gold, pred)) == label for _, pred, gold, label in cases)
        print(
            json.dumps(
                {
                    "data": "math-verify tests",
                    "mode": "math-verify compare_strings",
                    "agree": own,
                    "of": len(cases),
                    "share": round(own / len(cases), 4),
                }
            ),
            flush=True,
        )
        for mode in EXTRACT_MODES:
            result = agreement(cases, mode)
            result.pop("groups")
            print(json.dumps({"data": "math-verify tests", **result}), flush=True)
        result = agreement(cases, "math_verify", decimal_comma=True)
        print(json.dumps({"data": "math-verify tests", **result, "groups": None}), flush=True)
    mathverify._WORKER.close()


if __name__ == "__main__":
    main()
