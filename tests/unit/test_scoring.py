"""Verdicts and rewards from JUnit reports and exit codes."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

import pytest

from proctor.models import Scoring, TestFormat, TestOutcome, TestSpec, Verdict
from workers.evaluation.junit import ReportError, parse
from workers.evaluation.scoring import TestRun, score
from workers.evaluation.seal import SEAL_MARK, run_key, runs_pytest

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


def sealed(
    xml: str, *, key: bytes | None = None, passed: int | None = None, early: tuple[str, ...] = ()
) -> str:
    """The report as the grader plugin leaves it: pytest's bytes, then its seal."""
    run_id = secrets.token_hex(16)
    if passed is None:
        try:
            passed = sum(c.outcome is TestOutcome.passed for c in parse(xml).cases)
        except ReportError:
            passed = 0
    seal = {
        "v": 1,
        "run": run_id,
        "sha256": hashlib.sha256(xml.encode()).hexdigest(),
        "exitstatus": 0,
        "tests": passed,
        "passed": passed,
        "early": list(early),
    }
    text = json.dumps(seal, sort_keys=True, separators=(",", ":"))
    mac = hmac.new(key or run_key(run_id), text.encode(), "sha256").hexdigest()
    return f"{xml}{SEAL_MARK}{text} {mac} -->\n"


def run(xml: str | None, exit_code: int = 0, *, seal: bool = True, **kw: bool) -> TestRun:
    return TestRun(
        exit_code=exit_code,
        timed_out=kw.get("timed_out", False),
        oom_killed=kw.get("oom", False),
        report_xml=sealed(xml) if xml and seal else xml,
    )


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


def test_a_pytest_report_without_the_seal_fails() -> None:
    outcome = score(run(PASSING, seal=False), SPEC, Scoring.binary)
    assert (outcome.verdict, outcome.reward) == (Verdict.failed, 0.0)
    assert "no grader seal" in outcome.reason


def test_a_report_changed_after_the_seal_fails() -> None:
    report = sealed(FAILING).replace('<failure message="assert 1 == 2">x</failure>', "")
    outcome = score(TestRun(0, False, False, report), SPEC, Scoring.binary)
    assert outcome.reward == 0.0 and "changed after" in outcome.reason, outcome.reason


def test_a_seal_made_with_another_key_fails() -> None:
    report = sealed(PASSING, key=secrets.token_bytes(32))
    outcome = score(TestRun(0, False, False, report), SPEC, Scoring.binary)
    assert outcome.reward == 0.0 and "not valid" in outcome.reason


def test_a_forged_report_after_a_genuine_seal_fails() -> None:
    # what an atexit handler can do: keep the genuine seal, put a passing report before it
    genuine = sealed(FAILING)
    forged = PASSING + genuine[genuine.rindex(SEAL_MARK) :]
    outcome = score(TestRun(0, False, False, forged), SPEC, Scoring.binary)
    assert outcome.reward == 0.0 and "changed after" in outcome.reason


def test_workspace_code_before_arming_fails() -> None:
    report = sealed(PASSING, early=("evil_plugin",))
    outcome = score(TestRun(0, False, False, report), SPEC, Scoring.binary)
    assert outcome.reward == 0.0 and "evil_plugin" in outcome.reason


def test_more_passes_than_the_session_saw_fails() -> None:
    outcome = score(TestRun(0, False, False, sealed(PASSING, passed=1)), SPEC, Scoring.binary)
    assert outcome.reward == 0.0 and "the session saw 1" in outcome.reason


def test_a_runner_that_is_not_pytest_writes_its_own_report() -> None:
    spec = TestSpec(files={}, command="node run-tests.js")
    assert score(run(PASSING, seal=False), spec, Scoring.binary).reward == 1.0


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (None, True),
        ("python3 -I -m pytest -q tests", True),
        ("cd x && py.test", True),
        ("pytest", True),
        ("node run-tests.js", False),
        ("make check", False),
        ("python3 my_pytest_like.py", False),
    ],
)
def test_which_commands_must_be_sealed(command: str | None, expected: bool) -> None:
    assert runs_pytest(command) is expected
