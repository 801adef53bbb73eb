"""From what the runner reported to the scored result a trainer reads (both modes).

Terminal results are built by `core.results`; this maps a test run to its score and the
scored result.
"""

from __future__ import annotations

from core.results import ended
from core.store import EpisodeRecord
from proctor.models import (
    CheatCategory,
    CheatReport,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    SandboxInfo,
    Step,
    TaskSpec,
    Timings,
    Verdict,
)
from workers.evaluation.cases import score_cases
from workers.evaluation.grading import SplitShape
from workers.evaluation.scoring import Score, TestRun, score
from workers.sandbox.protocol import RunResult
from workers.sandbox.sandbox import Failure


def score_test_run(
    test: RunResult, task: TaskSpec, *, oom_killed: bool, split: SplitShape | None = None
) -> Score:
    if task.tests.judge is not None:  # format `cases`: the judge's record decides
        return score_cases(test.report, task.tests.judge, task.scoring)
    run = TestRun(
        exit_code=test.exit_code,
        timed_out=test.timed_out,
        oom_killed=oom_killed,
        report_xml=test.report,
        stderr=test.stderr,
        split=split,
    )
    return score(run, task.tests, task.scoring)


def compile_failed(compiled: RunResult | None) -> bool:
    """The compile run ran and failed (so the tests did not run)."""
    return compiled is not None and (compiled.timed_out or compiled.exit_code != 0)


def score_compile(compiled: RunResult, task: TaskSpec, *, oom_killed: bool) -> Score:
    """A program that does not compile, a compiler out of time or memory: the code's fault."""
    limits = task.limits
    if compiled.timed_out:
        reason = f"the compiler hit the compile time limit ({limits.compile_timeout_s:g} s)"
    elif oom_killed:
        reason = f"the compiler was killed for memory ({limits.memory_mb} MB)"
    else:
        reason = f"the code does not compile (the compiler exited {compiled.exit_code})"
    return Score(Verdict.compile_error, 0.0, False, reason=reason)


def compile_failed_result(
    record: EpisodeRecord,
    outcome: Score,
    compiled: RunResult,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
) -> EpisodeResult:
    """The result of code that did not compile: the compiler's output and exit status in
    place of the tests' (none ran; a compiler out of time has no exit status)."""
    result = graded_result(record, outcome, compiled, steps, info, timings)
    if compiled.timed_out:
        return result.model_copy(update={"exit_code": None})
    return result


def graded_result(
    record: EpisodeRecord,
    outcome: Score,
    test: RunResult | None,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
    *,
    reason: str | None = None,
) -> EpisodeResult:
    """The result of a graded episode; `test` is None when the sandbox broke before the
    tests ran (the outcome says why)."""
    found = [grader_evidence(line) for line in outcome.evidence]
    return ended(
        record,
        EpisodeStatus.completed,
        outcome.verdict,
        reward=outcome.reward,
        passed=outcome.passed,
        reason=reason or outcome.reason,
        tests=outcome.tests,
        stdout=test.stdout if test else "",
        stderr=test.stderr if test else outcome.reason,
        stdout_truncated=bool(test and test.stdout_truncated),
        stderr_truncated=bool(test and test.stderr_truncated),
        exit_code=test.exit_code if test else None,
        timings=timings,
        sandbox=info,
        steps=steps,
        step_rewards=[s.reward for s in steps],
        cheat=CheatReport(detected=bool(found), evidence=found),
    )


_GRADER_CATEGORIES = {
    "reads-tests": CheatCategory.eval_artifact_read,
    "frames": CheatCategory.eval_artifact_read,
    "heap": CheatCategory.eval_artifact_read,
    "ctypes": CheatCategory.grader_tampering,
    "patch": CheatCategory.grader_tampering,
    "early-exit": CheatCategory.test_tampering,
    "always-equal": CheatCategory.test_tampering,
    "forged-location": CheatCategory.grader_tampering,
}


def grader_evidence(line: str) -> Evidence:
    """One record of the runtime defences (`kind: detail`) as evidence: always a cheat, since
    each is solution code reaching for what the grader sees while the tests ran."""
    kind = line.split(":", 1)[0]
    return Evidence(
        source=EvidenceSource.grader,
        category=_GRADER_CATEGORIES.get(kind, CheatCategory.other),
        rule=f"grader.runtime.{kind}",
        detail=line[:1000],
    )


def broken_result(
    record: EpisodeRecord,
    failure: Failure,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
) -> EpisodeResult:
    """The code under test broke the sandbox before its tests could run (`classify` said
    so, with the verdict): a typed verdict with reward 0, in either mode."""
    outcome = Score(failure.verdict, 0.0, False, reason=failure.reason)
    return graded_result(record, outcome, None, steps, info, timings)
