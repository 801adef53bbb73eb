"""The built-in comparisons of a judged case (`workers/evaluation/compare.py`)."""

from __future__ import annotations

import pytest

from proctor.judging import Comparison
from workers.evaluation.compare import compare, number, numbers_close


def accepted(expected: str, actual: str, how: Comparison, **tol: float) -> bool:
    return compare(expected, actual, how, **tol) is None


def test_exact_is_byte_for_byte() -> None:
    assert accepted("1 2\n", "1 2\n", Comparison.exact)
    assert not accepted("1 2\n", "1 2", Comparison.exact)
    assert not accepted("1 2\n", "1  2\n", Comparison.exact)
    assert str(compare("abc", "abd", Comparison.exact)).startswith("character 3")


def test_lines_ignore_trailing_space_and_blank_lines() -> None:
    assert accepted("1 2\n3\n", "1 2   \n3\t\n\n\n", Comparison.lines)
    assert accepted("1 2\n3", "1 2\r\n3\r\n", Comparison.lines)
    assert not accepted("1 2\n3\n", "1  2\n3\n", Comparison.lines)  # inside a line: counts
    assert not accepted("1\n2\n", "1\n\n2\n", Comparison.lines)  # a blank line inside
    assert not accepted("1\n2\n", "1\n", Comparison.lines)
    assert str(compare("a\nb\n", "a\nc\n", Comparison.lines)) == "line 2: expected 'b', got 'c'"
    assert "(end of output)" in str(compare("a\nb\n", "a\n", Comparison.lines))


def test_tokens_ignore_all_whitespace_but_not_order() -> None:
    assert accepted("1 2\n3\n", "1\n2 3", Comparison.tokens)
    assert not accepted("1 2 3", "1 3 2", Comparison.tokens)
    assert not accepted("1 2 3", "1 2", Comparison.tokens)
    assert not accepted("1.0", "1", Comparison.tokens)  # tokens are not numbers here
    assert accepted("", "  \n", Comparison.tokens)


def test_float_within_absolute_or_relative_tolerance() -> None:
    assert accepted("0.333333", "0.3333334", Comparison.float)
    assert accepted("1", "1.0000000", Comparison.float)
    assert not accepted("0.5", "0.51", Comparison.float)
    assert accepted("0.5", "0.51", Comparison.float, abs_tol=0.02)
    # relative: against the expected value
    assert accepted("1000000", "1000000.5", Comparison.float, abs_tol=0, rel_tol=1e-6)
    assert not accepted("1000000", "1000002", Comparison.float, abs_tol=0, rel_tol=1e-6)
    assert accepted("1e-9 YES", "0.000000001 YES", Comparison.float)
    assert not accepted("1.5 YES", "1.5 NO", Comparison.float)
    assert not accepted("1.5", "abc", Comparison.float)
    assert not accepted("1 2", "1", Comparison.float)


@pytest.mark.parametrize(
    ("expected", "actual", "close"),
    [
        ("nan", "nan", True),
        ("nan", "1", False),
        ("inf", "inf", True),
        ("inf", "-inf", False),
        ("inf", "1e308", False),
        ("-0.0", "0", True),
    ],
)
def test_float_special_values(expected: str, actual: str, close: bool) -> None:
    assert numbers_close(expected, actual, 1e-6, 1e-6) is close


def test_number_refuses_what_a_judge_does_not_read() -> None:
    assert number("1_000") is None
    assert number("") is None
    assert number("0x10") is None
    assert number("-2.5e3") == -2500.0
