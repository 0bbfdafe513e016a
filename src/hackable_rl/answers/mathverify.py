"""math-verify behind a hard timeout, in one long-lived worker process.

Why a process: math-verify's own timeout is `signal.alarm`, which only works in the main thread,
takes whole seconds and cannot interrupt a hang the interpreter never returns from. A worker that
the parent waits on with `select` bounds every call in any thread; on a timeout the worker is
killed and a fresh one starts on the next call. The worker is a plain `python -m` subprocess
speaking one JSON line per request, not `multiprocessing`, so that scripts without an
`if __name__ == "__main__"` guard do not get re-imported. The round trip costs about a tenth of a
millisecond, and only answers that are not plain numbers ever get here.

The same worker also runs math-verify's own *extraction* for the judge's `math_verify` mode
(`math_verify_judge`): `math_verify.parse` finds the answer in a whole completion (boxed or not:
`$\\frac{10}{9}$`, `\\[ x \\]`, "the final answer is 1/2", `1,000.5`), then `verify` compares it with the
reference. math-verify's extraction regexes are super-linear on some inputs (a run of `\\[\\boxed{`
costs seconds per few thousand characters; 1 MB of `\\boxed{` about half a minute), so it searches the
completion's last `MAX_EXTRACT_CHARS` characters first and, only when nothing is found there, the
last `MAX_EXTRACT_CHARS_WIDE`; the worker's timeout bounds the rest.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import subprocess
import sys
import threading
import time
from typing import IO

from hackable_rl.core.registry import import_from_path

__all__ = [
    "MathVerifyWorker",
    "math_verify_equal",
    "math_verify_compare",
    "math_verify_judge",
    "math_verify_extract_and_compare",
    "STATS",
]

log = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 1000
"""Longer answers are not sent to math-verify at all (counted as no match): no real answer is this long."""
STARTUP_TIMEOUT_S = 120.0
"""Time the worker may take to start and import math-verify (sympy) on a loaded machine."""
MAX_EXTRACT_CHARS = 2000
"""The judge's `math_verify` mode first searches this many characters at the end of a completion,
where answers are (every MATH-500 solution ends its answer within 1,907 characters)."""
MAX_EXTRACT_CHARS_WIDE = 32000
"""...and, when nothing was found there, this many (about an 8k-token completion): a model that
states its answer and then rambles on is still read, and no input is searched whole."""
DEFAULT_COMPARE = "hackable_rl.answers.mathverify:math_verify_compare"

STATS = {"calls": 0, "timeouts": 0, "errors": 0, "too_long": 0}
"""Process-wide counters, for logs and tests."""


def math_verify_compare(predicted: str, reference: str) -> bool:
    """math-verify's judgement with its own (signal-based) timeouts off: the worker bounds it."""
    # deferred: math-verify loads only in its worker
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    gold = parse(f"${reference}$", extraction_config=configs, parsing_timeout=None)
    target = parse(f"${predicted}$", extraction_config=configs, parsing_timeout=None)
    if not gold or not target:
        return False
    return bool(verify(gold, target, timeout_seconds=None))


_DELIMITERS = ("\\(", "\\[", "\\boxed")
_DOLLAR = re.compile(r"(?<!\\)\$")
# Sentence punctuation written inside the closing delimiter, as MATH solutions do (`$\\pi.$`,
# `\\[x = 5.\\]`): math-verify cannot parse `\\pi.` and falls back to a stray number. `$` must follow
# the mark directly and be followed by a space, punctuation or the end (else it may open math);
# `\\,` `\\;` `\\:` are LaTeX spaces, not punctuation.
_PUNCTUATION_IN_MATH = re.compile(r"(?<=\S)(?<!\\)([.,;:])(?:(\$\$?)(?=\s|$|[.,;:!?)\]])|([ \t]*)(\\[)\]]))")


def _as_latex(answer: str) -> str:
    """A reference answer as math-verify expects to find it: bare LaTeX (`\\frac{3}{4}`, a MATH
    `answer`, `\\$18.90`) goes inside `$...$`; an answer that already has its delimiters is left alone."""
    if _DOLLAR.search(answer) or any(mark in answer for mark in _DELIMITERS):
        return answer
    return f"${answer}$"


def _punctuation_out_of_math(text: str) -> str:
    """`$\\pi.$` -> `$\\pi$.`, `\\[x = 5.\\]` -> `\\[x = 5\\].` (see `_PUNCTUATION_IN_MATH`)."""
    return _PUNCTUATION_IN_MATH.sub(
        lambda m: f"{m.group(2)}{m.group(1)}" if m.group(2) else f"{m.group(3)}{m.group(4)}{m.group(1)}", text
    )


def math_verify_extract_and_compare(completion: str, reference: str | None) -> list:
    """`[extracted answer or None, verdict]`: math-verify's own extraction of the completion (LaTeX
    with or without a box, then plain expressions), compared with the reference by `verify`
    (no reference: extraction only, verdict False).

    Searches `extraction_window(completion)` first and the whole `completion` (the caller sends at
    most `MAX_EXTRACT_CHARS_WIDE`) only when that finds nothing. The extracted answer is
    math-verify's string for what it found (normalised LaTeX, or the number as it read it:
    `1,000.5` -> `1000.5`). Its own timeouts are off: the worker bounds the call.
    """
    # deferred: math-verify loads only in its worker
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    window = extraction_window(completion)
    target = parse(_punctuation_out_of_math(window), extraction_config=configs, parsing_timeout=None)
    if not target and len(window) < len(completion):
        target = parse(_punctuation_out_of_math(completion), extraction_config=configs, parsing_timeout=None)
    if not target:
        return [None, False]
    extracted = target[-1] if isinstance(target[-1], str) else str(target[0])
    if reference is None:
        return [extracted, False]
    gold = parse(
        _punctuation_out_of_math(_as_latex(reference)), extraction_config=configs, parsing_timeout=None
    )
    if not gold:
        return [extracted, False]
    return [extracted, bool(verify(gold, target, timeout_seconds=None))]


def _serve(compare_path: str) -> None:
    """Worker loop on stdin/stdout, one JSON line each way: `["compare", predicted, reference]` ->
    `["ok", bool]`; `["judge", completion, reference]` -> `["ok", [extracted or null, bool]]`; a
    failure -> `["error", text]`."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its no-timeout warning is expected here
    import math_verify  # noqa: F401  (sympy's import takes most of a second: pay it before saying ready)

    compare = import_from_path(compare_path)
    operations = {
        "compare": lambda predicted, reference: bool(compare(predicted, reference)),
        "judge": math_verify_extract_and_compare,
    }
    _reply(["ready", None])
    for line in sys.stdin:
        operation, first, second = json.loads(line)
        try:
            _reply(["ok", operations[operation](first, second)])
        except Exception as error:  # a foreign library's failure on one answer must not kill the worker
            _reply(["error", f"{type(error).__name__}: {error}"])


def _reply(message: list) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class MathVerifyWorker:
    """One worker process, started lazily, restarted after a timeout; safe to share between threads."""

    def __init__(self, compare_path: str = DEFAULT_COMPARE):
        self._compare_path = compare_path
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def equal(self, predicted: str, reference: str, timeout_s: float) -> bool | None:
        """The compare function's verdict, or None when it did not answer within `timeout_s`."""
        reply = self._call("compare", predicted, reference, timeout_s)
        if reply is None:
            return None
        status, value = reply
        if status == "error":
            STATS["errors"] += 1
            log.warning(
                "math-verify failed on %r vs %r: %s (counted as no match)", predicted, reference, value
            )
            return False
        return bool(value)

    def judge(
        self, completion: str, reference: str | None, timeout_s: float
    ) -> tuple[str | None, bool] | None:
        """`math_verify_extract_and_compare` in the worker: (extracted answer or None, verdict), or
        None when it did not answer within `timeout_s`. A failure is (None, False), logged."""
        reply = self._call("judge", completion, reference, timeout_s)
        if reply is None:
            return None
        status, value = reply
        if status == "error":
            STATS["errors"] += 1
            log.warning("math-verify extraction failed against %r: %s (no answer)", reference, value)
            return None, False
        extracted, verdict = value
        return extracted, bool(verdict)

    def _call(self, operation: str, first: str, second: str | None, timeout_s: float) -> list | None:
        with self._lock:
            process = self._ensure_started()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write((json.dumps([operation, first, second]) + "\n").encode())
            process.stdin.flush()
            reply = _read_line(process.stdout, timeout_s)
            if reply is None:
                self._stop()
        return reply

    def _ensure_started(self) -> subprocess.Popen:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._stop()
        started = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))
        process = subprocess.Popen(
            [sys.executable, "-m", "hackable_rl.answers.mathverify", self._compare_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None
        if _read_line(process.stdout, STARTUP_TIMEOUT_S) is None:
            process.kill()
            process.wait()
            raise RuntimeError(
                f"math-verify worker did not start within {STARTUP_TIMEOUT_S:.0f} s (exit code {process.poll()})"
            )
        log.debug("math-verify worker started in %.2f s", time.perf_counter() - started)
        self._process = process
        return process

    def _stop(self) -> None:
        if self._process is None:
            return
        self._process.kill()
        self._process.wait(timeout=5)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._process = None

    def close(self) -> None:
        with self._lock:
            self._stop()


def _read_line(stream: IO[bytes], timeout_s: float) -> list | None:
    """One JSON line from the worker, or None on timeout or when the worker died."""
    ready, _, _ = select.select([stream], [], [], timeout_s)
    if not ready:
        return None
    line = stream.readline()
    return json.loads(line) if line else None


_WORKER = MathVerifyWorker()
# Stop the worker with the interpreter, so that no process (and no ResourceWarning) outlives a run.
atexit.register(_WORKER.close)


def math_verify_equal(predicted: str, reference: str, timeout_s: float = 2.0) -> bool:
    """True when math-verify says the answers are equivalent; a timeout, an error or an absurdly
    long answer is False (and counted in STATS, and logged)."""
    if len(predicted) > MAX_ANSWER_CHARS or len(reference) > MAX_ANSWER_CHARS:
        STATS["too_long"] += 1
        return False
    STATS["calls"] += 1
    verdict = _WORKER.equal(predicted, reference, timeout_s)
    if verdict is None:
        STATS["timeouts"] += 1
        log.warning(
            "math-verify timed out after %.2f s on %r vs %r (counted as no match)",
            timeout_s,
            predicted,
            reference,
        )
        return False
    return verdict


def extraction_window(text: str, limit: int = MAX_EXTRACT_CHARS) -> str:
    """The end of `text` that math-verify searches: at most `limit` characters. A cut inside a
    `$...$` (an odd number of unescaped `$` before it) moves past the next `$`, so that the window's
    dollars pair up as they do in the whole text. Linear time."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    if len(_DOLLAR.findall(text, 0, start)) % 2:
        after = _DOLLAR.search(text, start)
        start = after.end() if after else len(text)
    return text[start:]


def math_verify_judge(
    completion: str, reference: str | None, timeout_s: float = 2.0
) -> tuple[str | None, bool]:
    """(answer math-verify extracted from the completion, or None; whether it equals `reference`).

    Searches the end of the completion (see `math_verify_extract_and_compare`); a timeout or an
    error is (None, False), counted in STATS and logged (never a hang). `reference` is an answer
    (bare LaTeX is read as math) or a text with delimiters or boxes (a MATH solution, `$[0,1)$`),
    which math-verify searches like a completion; None extracts only (the verdict is then False).
    """
    STATS["calls"] += 1
    gold = None if reference is None else extraction_window(reference, MAX_EXTRACT_CHARS_WIDE)
    verdict = _WORKER.judge(extraction_window(completion, MAX_EXTRACT_CHARS_WIDE), gold, timeout_s)
    if verdict is None:
        STATS["timeouts"] += 1
        log.warning(
            "math-verify extraction timed out after %.2f s against %r (counted as no answer)",
            timeout_s,
            reference,
        )
        return None, False
    return verdict


if __name__ == "__main__":
    _serve(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_COMPARE)
