"""Verdicts and rewards from JUnit reports and exit codes."""

from __future__ import annotations

import pytest

from proctor.models import Scoring, TestFormat, TestSpec, Verdict
from workers.evaluation.junit import ReportError, parse
from workers.evaluation.scoring import TestRun, score

PASSING = """<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="2">
<testcase classname="tests.test_a.TestA" name="test_one" file="tests/test_a.py" time="0.01"/>
<testcase classname="tests.test_a" name="test_two" file="tests/test_a.py" time="0.02"/>
</testsuite></testsuites>"""

FAILING = """<testsuites><testsuite>
<testcase classname="test_a" name="test_one" file="test_a.py"/>
<testcase classname="test_a" name="test_two" file="test_a.py"><failure message="assert 1 == 2">x</failure></testcase>
</testsuite></testsuites>"""

SYNTAX = """<testsuites><testsuite>
<testcase classname="test_a" name="" file="test_a.py"><error message="collection failure">E   SyntaxError: invalid syntax</error></testcase>
</testsuite></testsuites>"""

IMPORT_ERROR = """<testsuites><testsuite>
<testcase classname="test_a" name=""><error message="collection failure">ModuleNotFoundError: No module named 'solution'</error></testcase>
</testsuite></testsuites>"""

EMPTY = "<testsuites><testsuite tests='0'></testsuite></testsuites>"
SPEC = TestSpec(files={"test_a.py": ""})


def run(xml: str | None, exit_code: int = 0, **kw: bool) -> TestRun:
    return TestRun(exit_code=exit_code, timed_out=kw.get("timed_out", False),
                   oom_killed=kw.get("oom", False), report_xml=xml)


def test_node_ids_follow_pytest() -> None:
    names = [c.name for c in parse(PASSING).cases]
    assert names == ["tests/test_a.py::TestA::test_one", "tests/test_a.py::test_two"]


def test_all_passing_pays_one() -> None:
    outcome = score(run(PASSING), SPEC, Scoring.binary)
    assert (outcome.verdict, outcome.reward, outcome.passed) == (Verdict.passed, 1.0, True)


def test_a_failure_pays_zero_or_the_fraction() -> None:
    assert score(run(FAILING, 1), SPEC, Scoring.binary).reward == 0.0
    partial = score(run(FAILING, 1), SPEC, Scoring.partial)
    assert (partial.verdict, partial.reward) == (Verdict.failed, 0.5)


@pytest.mark.parametrize("xml", [None, "", "not xml", "<html/>", EMPTY])
def test_missing_broken_or_empty_reports_fail(xml: str | None) -> None:
    outcome = score(run(xml), SPEC, Scoring.binary)
    assert (outcome.verdict, outcome.reward) == (Verdict.failed, 0.0)


def test_report_contradicting_the_exit_code_fails() -> None:
    outcome = score(run(PASSING, exit_code=1), SPEC, Scoring.binary)
    assert outcome.reward == 0.0


def test_syntax_and_import_errors() -> None:
    assert score(run(SYNTAX, 2), SPEC, Scoring.binary).verdict is Verdict.compile_error
    assert score(run(IMPORT_ERROR, 2), SPEC, Scoring.binary).verdict is Verdict.runtime_error


def test_timeout_and_oom_win_over_the_report() -> None:
    assert score(run(PASSING, timed_out=True), SPEC, Scoring.binary).verdict is Verdict.timeout
    assert score(run(PASSING, oom=True), SPEC, Scoring.binary).verdict is Verdict.oom


def test_exit_code_format() -> None:
    spec = TestSpec(files={}, format=TestFormat.exit_code)
    assert score(run(None, 0), spec, Scoring.binary).reward == 1.0
    assert score(run(None, 3), spec, Scoring.binary).reward == 0.0


def test_fail_to_pass_lists_decide() -> None:
    spec = TestSpec(files={}, fail_to_pass=["test_a.py::test_one"])
    assert score(run(FAILING, 1), spec, Scoring.binary).verdict is Verdict.passed
    spec = TestSpec(files={}, fail_to_pass=["test_a.py::test_one"], pass_to_pass=["test_two"])
    assert score(run(FAILING, 1), spec, Scoring.binary).verdict is Verdict.failed
    missing = TestSpec(files={}, fail_to_pass=["test_a.py::test_three"])
    outcome = score(run(FAILING, 1), missing, Scoring.binary)
    assert outcome.verdict is Verdict.failed and "not run" in outcome.reason


def test_parse_rejects_non_junit() -> None:
    with pytest.raises(ReportError):
        parse("<foo/>")
