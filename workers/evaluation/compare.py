"""Built-in output comparison of a judged case (`proctor.judging.Comparison`).

Runs in the worker, never in the sandbox: with these comparisons the expected outputs do
not enter the sandbox at all. Pure functions of two strings.

- `exact`: byte for byte.
- `lines`: line by line; trailing spaces and tabs of each line, trailing blank lines and
  `\\r` before `\\n` ignored (what verl's and SandboxFusion's graders compare).
- `tokens`: the same whitespace-separated tokens, in order.
- `float`: tokens; where both are numbers, `abs(a - b) <= abs_tol` or
  `<= rel_tol * abs(a)` (`a` the expected); other tokens exactly; nan equals nan, an
  infinity only itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from proctor.judging import Comparison

SHOWN_CHARS = 60


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where an output first differs from the expected one, for the case's message."""

    where: str  # "line 3", "token 7", "the end"
    expected: str
    got: str

    def __str__(self) -> str:
        return f"{self.where}: expected {_shown(self.expected)}, got {_shown(self.got)}"


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def compare(
    expected: str,
    actual: str,
    how: Comparison,
    *,
    abs_tol: float = 1e-6,
    rel_tol: float = 1e-6,
) -> Mismatch | None:
    """None when `actual` is accepted for `expected`, else the first difference."""
    if how is Comparison.exact:
        if expected == actual:
            return None
        at = next(
            (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
            min(len(expected), len(actual)),
        )
        return Mismatch(f"character {at + 1}", expected[at : at + 20], actual[at : at + 20])
    if how is Comparison.lines:
        return _lines(expected, actual)
    want, got = expected.split(), actual.split()
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        same = a == b or (how is Comparison.float and numbers_close(a, b, abs_tol, rel_tol))
        if not same:
            return Mismatch(f"token {i + 1}", a, b)
    if len(want) != len(got):
        at = min(len(want), len(got))
        return Mismatch(
            f"token {at + 1}",
            want[at] if at < len(want) else "(end of output)",
            got[at] if at < len(got) else "(end of output)",
        )
    return None


def _lines(expected: str, actual: str) -> Mismatch | None:
    want, got = _normal_lines(expected), _normal_lines(actual)
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        if a != b:
            return Mismatch(f"line {i + 1}", a, b)
    if len(want) != len(got):
        at = min(len(want), len(got))
        return Mismatch(
            f"line {at + 1}",
            want[at] if at < len(want) else "(end of output)",
            got[at] if at < len(got) else "(end of output)",
        )
    return None


def _normal_lines(text: str) -> list[str]:
    lines = [line.rstrip(" \t\r") for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def number(token: str) -> float | None:
    """A token read as a number (`1`, `-2.5`, `1e-9`, `inf`, `nan`), None if it is not one."""
    if not token or len(token) > 400 or token[-1] in "_" or "_" in token:
        return None  # float() takes `1_000`; a judge reading numbers does not
    try:
        return float(token)
    except ValueError:
        return None


def numbers_close(expected: str, actual: str, abs_tol: float, rel_tol: float) -> bool:
    """Two tokens as numbers within the tolerances (the relative one against the expected);
    False when either is not a number."""
    a, b = number(expected), number(actual)
    if a is None or b is None:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= abs_tol or abs(a - b) <= rel_tol * abs(a)
