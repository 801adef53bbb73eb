"""What the code under test can write where the grader reads a run's record — the `assert`
format's marker, a JUnit report and its seal — only ever fails the run: nesting past the
recursion limit, wrong types, truncation and any bytes end in the parser's own error (a
typed `failed`, reward 0), never in an exception the worker would take for its own."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.models import Scoring, TestFormat, TestSpec, Verdict
from workers.evaluation.junit import ReportError, parse
from workers.evaluation.marker import MarkerError, read_marker
from workers.evaluation.report_seal import SEAL_MARK, ReportSealBroken, unseal
from workers.evaluation.scoring import TestRun, score

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NESTED = "[" * 100_000 + "]" * 100_000
DEEP = 5_000


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
# records shaped like the bootstrap's, with any value where each field goes
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        key: JSON | st.just(nested(DEEP))
        for key in ("run", "mac", "exception", "file", "message", "files", "evidence")
    },
)


def dumped(value: Any) -> str:
    try:
        return json.dumps(value)
    except RecursionError:  # past what the encoder nests: written as text
        return NESTED


@FUZZ
@given(RECORDS, st.integers(min_value=0))
def test_a_marker_of_any_shape_or_cut_is_a_marker_error_at_worst(
    record: dict[str, Any], cut: int
) -> None:
    text = dumped(record)
    for candidate in (text, text[: cut % (len(text) + 1)]):
        try:
            marker = read_marker(candidate)
        except MarkerError:
            continue
        assert not marker.completed  # no mac of this run's nonce: never a completed run


@pytest.mark.parametrize(
    "text",
    [
        NESTED,
        '{"run": "r", "exception": "E", "file": ' + NESTED + "}",
        '{"run": "r", "exception": "E", "evidence": [{"kind": ' + NESTED + "}]}",
        '{"run": "r", "mac": "0", "files": ' + NESTED + "}",
        '{"run": ' + NESTED + "}",
        "\x00" * 1000,
        '{"run": "r", "exception": "E", "message": "\\ud800',
    ],
    ids=["nested", "file", "evidence", "files", "run", "nul", "cut-surrogate"],
)
def test_a_hostile_marker_fails_the_run(text: str) -> None:
    spec = TestSpec(files={"test_a.py": "assert True\n"}, format=TestFormat.assert_)
    run = TestRun(exit_code=-9, timed_out=False, oom_killed=False, report_xml=text)
    outcome = score(run, spec, Scoring.binary)
    assert (outcome.verdict, outcome.reward) in {(Verdict.failed, 0.0)}


@FUZZ
@given(st.text(max_size=400), st.integers(min_value=0, max_value=3))
def test_a_report_of_any_text_is_a_report_or_seal_error_at_worst(text: str, shape: int) -> None:
    report = [
        text,
        f"<testsuite>{text}</testsuite>",
        f"<testsuite/>{SEAL_MARK}{text} {'0' * 64} -->\n",
        f'<testsuite><testcase name="t" time="{text}"/></testsuite>',
    ][shape]
    with contextlib.suppress(ReportError):  # any other exception fails the test
        parse(report)
    with contextlib.suppress(ReportSealBroken):
        unseal(report)


@pytest.mark.parametrize(
    "report",
    [
        "<testsuite>" + "<a>" * 100_000 + "</a>" * 100_000 + "</testsuite>",
        f'<testsuite/>{SEAL_MARK}{{"run": {NESTED}}} {"0" * 64} -->\n',
        f'<testsuite/>{SEAL_MARK}{{"run": "r", "tests": "x"}} {"0" * 64} -->\n',
        '<testsuite><testcase name="t" time="nan"/><testcase name="u" time="-inf"/></testsuite>',
        "<testsuite>" + "<testcase" * 1000,
    ],
    ids=["nested-xml", "nested-seal", "wrong-types", "not-a-number", "truncated"],
)
@pytest.mark.parametrize("command", [None, "sh run_tests.sh"], ids=["sealed", "as-written"])
def test_a_hostile_report_fails_the_run(report: str, command: str | None) -> None:
    spec = TestSpec(files={"test_a.py": "def test_a():\n    pass\n"}, command=command)
    run = TestRun(exit_code=-9, timed_out=False, oom_killed=False, report_xml=report)
    outcome = score(run, spec, Scoring.binary)
    assert (outcome.verdict, outcome.reward) == (Verdict.failed, 0.0)
    assert all(0 <= case.duration_s < float("inf") for case in outcome.tests)
