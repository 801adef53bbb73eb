"""From a judged run's record to per-case verdicts, a verdict and a reward (format `cases`).

The record is the runner's own (`assets/judge.py`), built in its memory from pipes only it
held: the code under test could write none of it but its outputs, which are data here.

A case's verdict, the first rule that applies:

| the runner saw                                         | case verdict    |
|--------------------------------------------------------|-----------------|
| not run (the run's time spent, or `stop_on_failure`)   | skipped         |
| it ran out of `limits.timeout_s`                       | time_limit      |
| its stdout passed `limits.output_bytes`                | output_limit    |
| the memory cgroup's OOM count rose with its SIGKILL    | memory_limit    |
| it exited non-zero with its runtime's out-of-memory message (below) | memory_limit |
| it exited non-zero                                     | runtime_error   |
| the checker exited 0 / the comparison accepts          | accepted        |
| the checker exited 3, crashed or ran out of time       | checker_failed  |
| otherwise                                              | wrong_answer    |

The runtimes' messages are what each prints when an allocation fails inside its own heap
limit before the kernel's OOM killer has to act (Python's MemoryError, C++'s bad_alloc, the
JVM's OutOfMemoryError, Go's and Rust's allocation failures, V8's heap limit). A program
that prints one itself gets `memory_limit` for its `runtime_error`: both are worth 0.

The episode: `passed` (reward 1) when every case is accepted; otherwise the verdict of the
first case that is not (`wrong_answer` → failed, `time_limit` → timeout, `memory_limit` →
oom, `runtime_error`, `output_limit`, `checker_failed` → failed, `skipped` → failed), and the
reward is the fraction of cases accepted under `scoring: partial`, 0 under `binary`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proctor.judging import CaseVerdict, JudgeSpec
from proctor.models import Scoring, TestCase, TestOutcome, Verdict
from workers.evaluation.compare import compare
from workers.evaluation.scoring import Score
from workers.sandbox.docker import SandboxError

MESSAGE_CHARS = 500
OUT_OF_MEMORY = re.compile(
    r"^MemoryError\b"  # Python's last traceback line
    r"|std::bad_alloc"  # C++: terminate called after throwing an instance of 'std::bad_alloc'
    r"|java\.lang\.OutOfMemoryError"
    r"|fatal error: runtime: out of memory"  # Go
    r"|memory allocation of \d+ bytes failed"  # Rust's default alloc error handler
    r"|JavaScript heap out of memory",  # node
    re.MULTILINE,
)
EPISODE_VERDICTS = {
    CaseVerdict.wrong_answer: Verdict.failed,
    CaseVerdict.time_limit: Verdict.timeout,
    CaseVerdict.memory_limit: Verdict.oom,
    CaseVerdict.runtime_error: Verdict.runtime_error,
    CaseVerdict.output_limit: Verdict.output_limit,
    CaseVerdict.checker_failed: Verdict.failed,
    CaseVerdict.skipped: Verdict.failed,
}
# testlib's exit codes that reject the output: wrong answer, presentation error, dirt,
# unexpected end of file; 3 (`_fail`) and anything else is the checker's failure
CHECKER_REJECTS = frozenset({1, 2, 4, 8})


class RecordMalformed(SandboxError):
    """The judge's record is not what our runner writes: our failure, not the code's."""


class CheckerBroken(SandboxError):
    """The task's checker does not compile: the task's fault, never the code's (no reward,
    as for a task whose setup fails)."""


def case_verdict(case: dict[str, Any], expected: str, judge: JudgeSpec) -> tuple[CaseVerdict, str]:
    """One case's verdict and what to say of it."""
    status = case.get("status")
    stderr = str(case.get("stderr") or "")
    if status == "skipped":
        return CaseVerdict.skipped, "not run"
    if status == "timeout":
        return CaseVerdict.time_limit, "ran out of its time limit"
    if status == "output_limit":
        return CaseVerdict.output_limit, "printed more than the output limit"
    if status == "oom":
        return CaseVerdict.memory_limit, "killed for memory"
    if status != "exited":
        raise RecordMalformed(f"a case with status {status!r}")
    code = case.get("exit_code")
    if code != 0:
        if OUT_OF_MEMORY.search(stderr):
            return CaseVerdict.memory_limit, f"exited {code} out of memory: {stderr[-300:]}"
        return CaseVerdict.runtime_error, f"exited {code}: {stderr[-300:]}"
    if judge.checker is not None:
        return _checked(case.get("checker"))
    mismatch = compare(
        expected,
        str(case.get("stdout", "")),
        judge.comparison,
        abs_tol=judge.abs_tolerance,
        rel_tol=judge.rel_tolerance,
    )
    if mismatch is None:
        return CaseVerdict.accepted, ""
    return CaseVerdict.wrong_answer, f"wrong answer at {mismatch}"


def _checked(checker: Any) -> tuple[CaseVerdict, str]:
    if not isinstance(checker, dict):
        raise RecordMalformed("a case that exited 0 has no checker result")
    code, message = checker.get("exit_code"), str(checker.get("message") or "").strip()
    if code == 0:
        return CaseVerdict.accepted, message
    if code in CHECKER_REJECTS:
        return CaseVerdict.wrong_answer, f"the checker rejects it ({code}): {message}"
    if code is None:
        return CaseVerdict.checker_failed, "the checker ran out of time"
    return CaseVerdict.checker_failed, f"the checker failed ({code}): {message}"


def score_cases(record_text: str | None, judge: JudgeSpec, scoring: Scoring) -> Score:
    """The episode's score from the judge's record (raises for a record or checker that
    is not the code's doing)."""
    try:
        record = json.loads(record_text or "")
        cases = record["cases"]
        if not isinstance(cases, list) or len(cases) != len(judge.cases):
            raise ValueError("not one result per case")
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordMalformed(f"the judge's record is unreadable: {exc}") from exc
    build = record.get("checker_build")
    if build is not None:
        raise CheckerBroken(
            "the task's checker does not compile"
            + (" in time" if build.get("exit_code") is None else "")
            + f": {str(build.get('message', ''))[-1000:]}"
        )
    tests: list[TestCase] = []
    first_failure: CaseVerdict | None = None
    for number, (case, spec) in enumerate(zip(cases, judge.cases, strict=True), start=1):
        verdict, message = case_verdict(case, spec.expected_stdout, judge)
        if first_failure is not None and judge.stop_on_failure:
            verdict, message = CaseVerdict.skipped, "not counted: an earlier case failed"
        if verdict is not CaseVerdict.accepted and first_failure is None:
            first_failure = verdict
        tests.append(
            TestCase(
                name=f"case {number}",
                outcome=_outcome(verdict),
                duration_s=float(case.get("time_s") or 0.0),
                message=message[:MESSAGE_CHARS] or None,
                verdict=verdict,
            )
        )
    accepted = sum(t.verdict is CaseVerdict.accepted for t in tests)
    if first_failure is None:
        return Score(Verdict.passed, 1.0, True, tests, f"all {len(tests)} cases accepted")
    reward = accepted / len(tests) if scoring is Scoring.partial else 0.0
    reason = f"{accepted} of {len(tests)} cases accepted; the first failure: {first_failure}"
    return Score(EPISODE_VERDICTS[first_failure], reward, False, tests, reason)


def _outcome(verdict: CaseVerdict) -> TestOutcome:
    if verdict is CaseVerdict.accepted:
        return TestOutcome.passed
    if verdict is CaseVerdict.skipped:
        return TestOutcome.skipped
    if verdict in (CaseVerdict.wrong_answer, CaseVerdict.checker_failed):
        return TestOutcome.failed
    return TestOutcome.error
