"""From what the runner reported to the scored result a trainer reads (both modes).

Terminal results are built by `core.results`; this maps a test run to its score and the
scored result.
"""

from __future__ import annotations

from core.results import ended
from core.store import EpisodeRecord
from proctor.models import EpisodeResult, EpisodeStatus, SandboxInfo, Step, TaskSpec, Timings
from workers.evaluation.scoring import Score, TestRun, score
from workers.sandbox.protocol import RunResult
from workers.sandbox.sandbox import Failure


def score_test_run(test: RunResult, task: TaskSpec, *, oom_killed: bool) -> Score:
    run = TestRun(
        exit_code=test.exit_code,
        timed_out=test.timed_out,
        oom_killed=oom_killed,
        report_xml=test.report,
        stderr=test.stderr,
    )
    return score(run, task.tests, task.scoring)


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
