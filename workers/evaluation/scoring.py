"""From a test run to a verdict and a reward.

The rules, in order (the first that applies decides):

| what happened                                   | verdict        | reward          |
|-------------------------------------------------|----------------|-----------------|
| our infrastructure failed                       | infra_error    | null            |
| the run hit its wall-clock limit                | timeout        | 0               |
| the kernel OOM-killed a process of the run      | oom            | 0               |
| no report, unreadable report, zero tests        | failed/…error  | 0               |
| a pytest report without a valid grader seal     | failed         | 0               |
| split: a malformed grader's record             | failed         | 0               |
| split: the solution's process exited mid-run    | failed         | 0               |
| `assert`: a test program raised a SyntaxError   | compile_error  | 0               |
| `assert`: no marker with this run's nonce       | failed         | 0               |
| `assert`: the marker, and the run exited 0      | passed         | 1               |
| the runtime defences recorded evidence          | (as above) → cheat, by the reward policy |
| workspace code ran before the grader armed      | failed         | 0               |
| the code does not compile (SyntaxError)         | compile_error  | 0               |
| a test module failed to import                  | runtime_error  | 0               |
| listed FAIL_TO_PASS/PASS_TO_PASS tests all pass | passed         | 1               |
| every test passed and the runner agrees (rc 0)  | passed         | 1               |
| otherwise                                       | failed         | 0 (or fraction) |

A report and an exit code that disagree (a report of all passes from a run that exited
non-zero) is a failure: the code under test may have written that report itself. A command
that runs pytest loads the grader plugin, which seals the report at the end of the session
(`report_seal.py`); a report that lacks the seal, or was changed after it, was not written by the
session we graded. Other commands write JUnit XML themselves and are trusted as written.

A split run (`grading.split_shape`) has the grader's record, read from a pipe only that
process held (`record.py`): it needs no seal, and its cases are scored as a report's.

In-process, the `assert` format has no report: its bootstrap writes the run's nonce
(`marker.py`) only after the last test program returned, so an early `sys.exit(0)` or
`os._exit(0)` leaves none. It is all-or-nothing whatever the task's `scoring`: what
stopped a run is the bootstrap's unauthenticated record, which must not earn a fraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proctor.models import Scoring, TestCase, TestFormat, TestOutcome, TestSpec, Verdict
from workers.evaluation.grading import SplitShape
from workers.evaluation.junit import MAX_MESSAGE_CHARS, Report, ReportError, parse
from workers.evaluation.marker import Marker, MarkerError, read_marker
from workers.evaluation.record import RecordError, read_record
from workers.evaluation.report_seal import ReportSealBroken, runs_pytest, unseal

COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")


@dataclass(slots=True)
class TestRun:
    """What the runner saw of one test command."""

    __test__ = False  # not a pytest test class

    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    report_xml: str | None  # the JUnit report; with the `assert` format, the marker; of a
    # split run, the grader's record
    stderr: str = ""
    split: SplitShape | None = None  # graded across a process boundary (`grading.py`)


@dataclass(slots=True)
class Score:
    verdict: Verdict
    reward: float
    passed: bool
    tests: list[TestCase] = field(default_factory=list)
    reason: str = ""
    # what the grading process's runtime defences saw solution code do (from the sealed
    # report or the authenticated marker): each one makes the episode a cheat
    evidence: list[str] = field(default_factory=list)


def _selected(cases: list[TestCase], wanted: list[str]) -> tuple[list[TestCase], list[str]]:
    by_name = {c.name: c for c in cases}
    found, missing = [], []
    for name in wanted:
        case = by_name.get(name) or next((c for c in cases if c.name.endswith("::" + name)), None)
        if case is None:
            missing.append(name)
        else:
            found.append(case)
    return found, missing


def score(run: TestRun, spec: TestSpec, scoring: Scoring) -> Score:
    if run.timed_out:
        return Score(Verdict.timeout, 0.0, False, reason="the tests hit the time limit")
    if run.oom_killed:
        return Score(Verdict.oom, 0.0, False, reason="a process was killed for memory")
    if spec.format is TestFormat.exit_code:
        ok = run.exit_code == 0
        return Score(
            Verdict.passed if ok else Verdict.failed,
            1.0 if ok else 0.0,
            ok,
            reason=f"the test command exited {run.exit_code}",
        )
    if run.split is not None:
        return _score_split(run, spec, scoring)
    if spec.format is TestFormat.assert_:
        return _score_marker(run, spec)
    evidence: list[str] = []
    outcome = _score_junit(run, spec, scoring, evidence)
    outcome.evidence = evidence
    return outcome


def _score_junit(run: TestRun, spec: TestSpec, scoring: Scoring, evidence: list[str]) -> Score:
    xml = run.report_xml
    try:
        if xml and runs_pytest(spec.command):
            xml, seal = unseal(xml)
            evidence += seal.evidence
            if seal.early:
                return Score(
                    Verdict.failed,
                    0.0,
                    False,
                    reason=(
                        "code from writable places ran before the grader plugin armed: "
                        + ", ".join(seal.early)
                    ),
                )
            report = parse(xml)
            passed = sum(c.outcome is TestOutcome.passed for c in report.cases)
            if passed > seal.passed:
                return Score(
                    Verdict.failed,
                    0.0,
                    False,
                    report.cases,
                    (f"the report counts {passed} passes, the session saw {seal.passed}"),
                )
        else:
            report = parse(xml)
    except (ReportError, ReportSealBroken) as exc:
        return Score(Verdict.failed, 0.0, False, reason=str(exc))
    return _score_report(report, run, spec, scoring)


def _score_report(report: Report, run: TestRun, spec: TestSpec, scoring: Scoring) -> Score:
    cases = report.cases
    if not cases:
        return Score(Verdict.failed, 0.0, False, cases, "no tests were collected")
    errors = [c for c in cases if c.outcome is TestOutcome.error]
    if errors and any(m in (c.message or "") for c in errors for m in COMPILE_ERRORS):
        return Score(Verdict.compile_error, 0.0, False, cases, "the code does not compile")
    if report.collection_errors:
        return Score(Verdict.runtime_error, 0.0, False, cases, "a test module failed to import")

    wanted = spec.fail_to_pass + spec.pass_to_pass
    if wanted:
        selected, missing = _selected(cases, wanted)
        if missing:
            reason = f"listed tests were not run: {', '.join(missing[:5])}"
            return Score(Verdict.failed, 0.0, False, cases, reason)
        ok = all(c.outcome is TestOutcome.passed for c in selected)
        fraction = sum(c.outcome is TestOutcome.passed for c in selected) / len(selected)
    else:
        ok = report.all_passed and run.exit_code == 0
        counted = [c for c in cases if c.outcome is not TestOutcome.skipped]
        fraction = sum(c.outcome is TestOutcome.passed for c in counted) / max(len(counted), 1)
        if report.all_passed and run.exit_code != 0:
            reason = f"the report says all passed but the run exited {run.exit_code}"
            return Score(Verdict.failed, 0.0, False, cases, reason)
    if ok:
        return Score(Verdict.passed, 1.0, True, cases, "all tests passed")
    reward = fraction if scoring is Scoring.partial else 0.0
    failed = sum(c.outcome is not TestOutcome.passed for c in cases)
    reason = f"{failed} of {len(cases)} tests did not pass"
    return Score(Verdict.failed, reward, False, cases, reason)


def _score_split(run: TestRun, spec: TestSpec, scoring: Scoring) -> Score:
    """A split run's record came through a pipe only its grader held, a process the code
    under test could neither reach nor impersonate: it needs no seal. Still parsed as the
    untrusted text any sandbox output is (a grader the tests themselves broke)."""
    try:
        record = read_record(run.report_xml)
    except RecordError as exc:
        return Score(Verdict.failed, 0.0, False, reason=f"{exc}; it exited {run.exit_code}")
    if isinstance(record, Marker):
        files = sorted(p for p in spec.files if p.endswith(".py"))
        return _score_completion(record, run, files)
    if record.gone:  # as a process that exited mid-run: no pass, not even a fraction
        cases = record.report.cases
        return Score(Verdict.failed, 0.0, False, cases, record.gone[:MAX_MESSAGE_CHARS])
    return _score_report(record.report, run, spec, scoring)


def _score_marker(run: TestRun, spec: TestSpec) -> Score:
    files = sorted(p for p in spec.files if p.endswith(".py"))
    try:
        marker = read_marker(run.report_xml)
    except MarkerError as exc:
        return Score(Verdict.failed, 0.0, False, reason=f"{exc}; it exited {run.exit_code}")
    outcome = _score_completion(marker, run, files)
    outcome.evidence = marker.evidence
    return outcome


def _score_completion(marker: Marker, run: TestRun, files: list[str]) -> Score:
    if not marker.completed:
        detail = f"{marker.exception}: {marker.message}".strip().rstrip(":")
        case = TestCase(
            name=marker.file or "tests",
            outcome=TestOutcome.failed,
            message=detail[:MAX_MESSAGE_CHARS],
        )
        if marker.exception in COMPILE_ERRORS:
            return Score(Verdict.compile_error, 0.0, False, [case], "the code does not compile")
        if marker.exception == "SystemExit":
            reason = f"the run exited ({detail}) before the tests ended"
        else:
            reason = f"{case.name} raised {detail}"
        return Score(Verdict.failed, 0.0, False, [case], reason[:MAX_MESSAGE_CHARS])
    cases = [TestCase(name=f, outcome=TestOutcome.passed) for f in files]
    if run.exit_code != 0:
        reason = f"the tests ran to their end but the run exited {run.exit_code}"
        return Score(Verdict.failed, 0.0, False, cases, reason)
    return Score(Verdict.passed, 1.0, True, cases, "all tests passed")
