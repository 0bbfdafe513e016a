"""Numbers in answers: a boxed or stated answer read as a number (`normalize_number`: thousands
separators, fractions, `\\frac`, scientific notation, units and LaTeX wrappers), and decimal commas
read as points where the judge is told to (`read_decimal_commas`)."""

from __future__ import annotations

import math
import re
from functools import lru_cache

__all__ = ["normalize_number", "read_decimal_commas"]

_CACHE_SIZE = 1 << 16

_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_DIGITS_AND_COMMAS = re.compile(r"[\d,]+")
_FRAC = re.compile(r"^([-+]?)\\[dt]?frac\{\s*(" + _NUMBER + r")\s*\}\{\s*(" + _NUMBER + r")\s*\}$")
_FRAC_SHORT = re.compile(r"^([-+]?)\\[dt]?frac(\d)(\d)$")
_SLASH = re.compile(r"^(" + _NUMBER + r")\s*/\s*(" + _NUMBER + r")$")
# `\s*(?:\{\s*)?` rather than `\s*\{?\s*`: the same strings, without trying every split of a long
# run of spaces between two `\s*` (quadratic backtracking on adversarial input).
_TIMES_TEN = re.compile(
    r"^(" + _NUMBER + r")\s*(?:\\times|\\cdot|x|\*)\s*10\s*\^\s*(?:\{\s*)?([-+]?\d+)\s*\}?$"
)
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_UNIT_TAIL = re.compile(r"^(.*?\d\.?)\s*([a-zA-Z]+(?:\s+[a-zA-Z]+)*)\.?$")
_VARIABLE_PREFIX = re.compile(r"^[a-zA-Z]\s*=\s*")
# Words that are mathematics, not units: "3 pi" is not 3.
_NOT_UNITS = frozenset({"pi", "sqrt", "i", "e", "inf", "infty", "infinity", "or", "and", "to", "x", "y", "n"})
_STRIP_TOKENS = ("\\$", "$", "\\%", "%", "\\!", "\\,", "\\;", "\\ ", "^\\circ", "^{\\circ}", "\\circ", "°")


@lru_cache(maxsize=_CACHE_SIZE)
def normalize_number(text: str) -> float | None:
    """The number an answer string denotes, or None when it is not a plain number.

    Handles thousands separators, `$`, `%`, degree signs, unit words (`12 apples`, `\\text{ cm}`),
    `x = 5`, trailing `.0`, signs (including the Unicode minus), `\\frac`/`\\dfrac`/`\\tfrac`,
    `a/b`, decimals and scientific notation (`1.5e3`, `1.5 \\times 10^{3}`).
    """
    if _PLAIN_NUMBER.fullmatch(text):
        return float(text)  # the hot path: most answers are bare integers
    cleaned = _clean_number_text(text)
    if not cleaned:
        return None
    return _number_value(cleaned)


def _clean_number_text(text: str) -> str:
    cleaned = text.strip().replace("\u2212", "-").replace("\u2013", "-")
    cleaned = _TEXT_WRAPPER.sub(r" \1", cleaned)
    for token in _STRIP_TOKENS:
        cleaned = cleaned.replace(token, "")
    cleaned = _VARIABLE_PREFIX.sub("", cleaned.strip())
    if "," in cleaned:
        cleaned = _DIGITS_AND_COMMAS.sub(_drop_thousands_separators, cleaned)
    unit = _UNIT_TAIL.match(cleaned)
    if unit and not set(unit.group(2).lower().split()) & _NOT_UNITS:
        cleaned = unit.group(1)
    cleaned = cleaned.strip().rstrip(".").strip()
    if cleaned.startswith("{") and cleaned.endswith("}"):
        cleaned = cleaned[1:-1].strip()
    return cleaned


def _drop_thousands_separators(run: re.Match[str]) -> str:
    """One maximal run of digits and commas with its thousands grouping (`1,234,567`) unseparated.

    The rule is the regex `(?<![\\d.])\\d{1,3}(?:,\\d{3})+(?![\\d,])` applied to the text, computed
    per run in linear time (the regex retries the rest of the run from every comma: quadratic on
    `1,234,...,2345`). A match must end where the run ends, so it is the leftmost piece i (split at
    commas) with 1-3 digits, followed only by 3-digit pieces (at least one), and not preceded by a
    digit or a `.` (only the first piece can be: the others follow a comma).
    """
    text = run.group()
    pieces = text.split(",")
    last = len(pieces) - 1
    first_full = last + 1  # first piece of the trailing run of 3-digit pieces
    while first_full > 0 and len(pieces[first_full - 1]) == 3:
        first_full -= 1
    after_dot = run.start() > 0 and run.string[run.start() - 1] == "."
    for index in (first_full - 1, first_full, first_full + 1):
        if index < 0 or index >= last or not 1 <= len(pieces[index]) <= 3 or (index == 0 and after_dot):
            continue
        start = sum(len(piece) + 1 for piece in pieces[:index])
        return text[:start] + "".join(pieces[index:])
    return text


# A number with a decimal comma: `1,22`, `0,111`, `1000,99`, `1.234,5` (dots group thousands). Not
# part of a longer run such as the list `1,2,3` or `1,000.5` (a digit, `,` or `.` before it; a
# digit, `,` or `.digit` after it).
_DECIMAL_COMMA = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})+|\d+),(\d+)(?![\d,]|\.\d)")


def read_decimal_commas(text: str) -> str:
    """`text` with every decimal-comma number rewritten with a decimal point: `1,22` -> `1.22`,
    `1.234,5` -> `1234.5`. For data written that way (the judge's `decimal_comma` option): a comma
    between two digit runs then never groups thousands (`1,222` is 1.222) and a pair `(1,2)` reads
    as `(1.2)`, so it is off by default. Linear time."""
    if "," not in text:
        return text
    return _DECIMAL_COMMA.sub(lambda match: f"{match.group(1).replace('.', '')}.{match.group(2)}", text)


def _number_value(text: str) -> float | None:
    if _NUMBER_RE.fullmatch(text):
        return _finite(float(text))
    frac = _FRAC.match(text) or _FRAC_SHORT.match(text)
    if frac:
        sign, numerator, denominator = frac.groups()
        return _ratio(float(numerator), float(denominator), negative=sign == "-")
    slash = _SLASH.match(text)
    if slash:
        return _ratio(float(slash.group(1)), float(slash.group(2)), negative=False)
    times_ten = _TIMES_TEN.match(text)
    if times_ten:
        return _finite(float(times_ten.group(1)) * 10.0 ** int(times_ten.group(2)))
    return None


def _ratio(numerator: float, denominator: float, negative: bool) -> float | None:
    if denominator == 0:
        return None
    value = numerator / denominator
    return _finite(-value if negative else value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
