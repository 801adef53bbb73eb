"""Verdicts and rewards from JUnit reports, exit codes and completion markers."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.models import Scoring, TestFormat, TestOutcome, TestSpec, Verdict
from workers.evaluation.junit import ReportError, parse
from workers.evaluation.marker import MARKER_NAME, NONCE_NAME, bootstrap_source, nonce_of
from workers.evaluation.marker import new_run as new_marker_run
from workers.evaluation.report_seal import (
    DEFENCES_NAME,
    SEAL_MARK,
    defences_source,
    run_key,
    runs_pytest,
)
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


# ------------------------------------------------------------------ the assert format

ASSERT_SPEC = TestSpec(files={"test_a.py": ""}, format=TestFormat.assert_)


def marker_run(marker: str | None, exit_code: int = 0) -> TestRun:
    return TestRun(exit_code=exit_code, timed_out=False, oom_killed=False, report_xml=marker)


def completed(
    run_id: str | None = None, nonce: str | None = None, evidence: list[Any] | None = None
) -> str:
    """A marker as the bootstrap writes it: the record and its HMAC keyed by the nonce."""
    run_id = run_id or secrets.token_hex(16)
    record = {"run": run_id, "files": ["test_a.py"], "evidence": evidence or []}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    key = (nonce or nonce_of(run_id)).encode()
    return json.dumps({**record, "mac": hmac.new(key, text.encode(), "sha256").hexdigest()})


def test_a_marker_with_the_runs_nonce_passes() -> None:
    result = score(marker_run(completed()), ASSERT_SPEC, Scoring.binary)
    assert (result.verdict, result.reward, result.passed) == (Verdict.passed, 1.0, True)
    assert [(c.name, c.outcome) for c in result.tests] == [("test_a.py", TestOutcome.passed)]


@pytest.mark.parametrize("marker", [None, "", "  \n"])
def test_no_marker_fails(marker: str | None) -> None:
    result = score(marker_run(marker), ASSERT_SPEC, Scoring.partial)
    assert (result.verdict, result.reward) == (Verdict.failed, 0.0)
    assert "no completion marker" in result.reason


@pytest.mark.parametrize(
    "marker",
    [
        completed(nonce="0" * 64),  # a guessed nonce
        completed(nonce=nonce_of("another-run")),  # another run's nonce under this run's id
        json.dumps({"run": "r", "files": ["test_a.py"]}),  # no nonce, no exception record
        json.dumps({"run": "r", "nonce": 1}),
        "proctor-assert-complete",
        json.dumps(["run", "nonce"]),
    ],
)
def test_a_marker_without_the_runs_nonce_fails(marker: str) -> None:
    result = score(marker_run(marker), ASSERT_SPEC, Scoring.binary)
    assert (result.verdict, result.reward) == (Verdict.failed, 0.0)


def test_a_worker_secret_is_what_makes_a_nonce() -> None:
    run_id = secrets.token_hex(16)
    assert nonce_of(run_id) != hmac.new(run_key(run_id), b"", "sha256").hexdigest()
    assert nonce_of(run_id) != run_key(run_id).hex()  # not the grader plugin's key


def test_a_marker_from_a_run_that_exited_non_zero_fails() -> None:
    result = score(marker_run(completed(), exit_code=3), ASSERT_SPEC, Scoring.binary)
    assert (result.verdict, result.reward) == (Verdict.failed, 0.0)
    assert "exited 3" in result.reason


def test_what_stopped_the_run_is_its_verdict() -> None:
    def stopped(exception: str, message: str) -> str:
        record = {"run": "r", "file": "test_a.py", "exception": exception, "message": message}
        return json.dumps(record)

    syntax = score(marker_run(stopped("SyntaxError", "bad"), 1), ASSERT_SPEC, Scoring.binary)
    assert syntax.verdict is Verdict.compile_error
    failed = score(marker_run(stopped("AssertionError", ""), 1), ASSERT_SPEC, Scoring.partial)
    assert (failed.verdict, failed.reward) == (Verdict.failed, 0.0)
    assert [(c.name, c.outcome) for c in failed.tests] == [("test_a.py", TestOutcome.failed)]
    early = score(marker_run(stopped("SystemExit", "0"), 0), ASSERT_SPEC, Scoring.binary)
    assert (early.verdict, early.reward) == (Verdict.failed, 0.0)
    assert "before the tests ended" in early.reason


def test_time_and_memory_limits_come_before_the_marker() -> None:
    timed_out = TestRun(exit_code=-9, timed_out=True, oom_killed=False, report_xml=completed())
    assert score(timed_out, ASSERT_SPEC, Scoring.binary).verdict is Verdict.timeout
    oom = TestRun(exit_code=137, timed_out=False, oom_killed=True, report_xml=None)
    assert score(oom, ASSERT_SPEC, Scoring.binary).verdict is Verdict.oom


def test_the_assert_format_takes_no_command() -> None:
    with pytest.raises(ValueError, match="give no command"):
        TestSpec(files={"t.py": ""}, command="python3 t.py", format=TestFormat.assert_)
    assert TestSpec.model_validate({"format": "assert"}).format is TestFormat.assert_


BOOTSTRAP_TESTS = "from solution import f\n\nassert f(1) == 2\nassert f(-1) == 0\n"


@pytest.mark.parametrize(
    ("solution", "verdict"),
    [
        ("def f(x):\n    return x + 1\n", Verdict.passed),
        ("def f(x):\n    return x\n", Verdict.failed),
        ("import sys\nsys.exit(0)\n", Verdict.failed),
        ("import os\nos._exit(0)\n", Verdict.failed),
        ("def f(x):\n    raise SystemExit\n", Verdict.failed),
        ("def f(x):\n    import os; os._exit(0)\n", Verdict.failed),
        (
            "import atexit, os, sys\n"
            "atexit.register(lambda: os._exit(0))\n"
            "sys.excepthook = lambda *a: None\n"
            "def f(x):\n    return x\n",
            Verdict.failed,
        ),
        (
            "import atexit, os\n"
            "path = os.environ['PROCTOR_JUNIT_XML']\n"
            "def forge():\n"
            "    with open(path, 'w') as h:\n"
            '        h.write(\'{"run": "r", "nonce": "%s", "files": []}\' % (\'0\' * 64))\n'
            "atexit.register(forge)\n"
            "def f(x):\n    return x\n",
            Verdict.failed,
        ),
        (
            "import glob, json, os\n"
            "for path in glob.glob(os.environ['GRADER'] + '/*'):\n"
            "    try:\n"
            "        data = json.loads(open(path).read())\n"
            "    except ValueError:\n"
            "        continue\n"
            "    if 'nonce' in data:  # forge the marker with the run's own nonce\n"
            "        data['files'] = ['test_a.py']\n"
            "        open(os.environ['PROCTOR_JUNIT_XML'], 'w').write(json.dumps(data))\n"
            "        os._exit(0)\n"
            "def f(x):\n    return x\n",
            Verdict.failed,
        ),
        ("def f(x:\n", Verdict.compile_error),
    ],
    ids=[
        "correct",
        "wrong",
        "sys-exit-at-import",
        "os-exit-at-import",
        "system-exit-in-f",
        "os-exit-in-f",
        "atexit-and-excepthook",
        "atexit-forges-a-marker",
        "reads-the-grader-dir",
        "syntax-error",
    ],
)
def test_the_bootstrap_passes_only_tests_that_ran_to_their_end(
    tmp_path: Path, solution: str, verdict: Verdict
) -> None:
    """The real bootstrap, without a sandbox: the marker scores as grading would score it."""
    grader = tmp_path / "grader"
    grader.mkdir(mode=0o700)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "solution.py").write_text(solution)
    (workspace / "test_a.py").write_text(BOOTSTRAP_TESTS)
    report = grader / MARKER_NAME
    run_id, nonce = new_marker_run()
    (grader / NONCE_NAME).write_text(
        json.dumps({"run": run_id, "nonce": nonce, "marker": str(report)})
    )
    (grader / "bootstrap.py").write_text(bootstrap_source())
    (grader / DEFENCES_NAME).write_text(defences_source())
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(grader / "bootstrap.py"), "test_a.py"],
        cwd=workspace,
        env={"PROCTOR_JUNIT_XML": str(report), "GRADER": str(grader), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert not (grader / NONCE_NAME).exists()
    text = report.read_text() if report.exists() else None
    run = TestRun(exit_code=done.returncode, timed_out=False, oom_killed=False, report_xml=text)
    result = score(run, ASSERT_SPEC, Scoring.binary)
    assert result.verdict is verdict, (result.reason, done.stderr[-500:])
