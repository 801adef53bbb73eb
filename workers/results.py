"""From what the runner reported to the result a trainer reads (one-shot and interactive)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.store import EpisodeRecord
from proctor.models import (
    EpisodeResult,
    EpisodeStatus,
    SandboxInfo,
    Step,
    TaskSpec,
    Timings,
    Verdict,
)
from workers.evaluation.scoring import Score, TestRun, score


def infra_failure(record: EpisodeRecord, message: str, **extra: Any) -> EpisodeResult:
    base = record.public().model_dump()
    base.update(
        status=EpisodeStatus.failed, verdict=Verdict.infra_error, reward=None, passed=None,
        error=message, finished_at=datetime.now(UTC), **extra,
    )
    return EpisodeResult.model_validate(base)


def score_test_run(test: dict[str, Any], task: TaskSpec, *, oom_killed: bool) -> Score:
    run = TestRun(exit_code=test["exit_code"], timed_out=test["timed_out"],
                  oom_killed=oom_killed, report_xml=test.get("report"), stderr=test["stderr"])
    return score(run, task.tests, task.scoring)


def graded_result(
    record: EpisodeRecord,
    outcome: Score,
    test: dict[str, Any] | None,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
    *,
    reason: str | None = None,
) -> EpisodeResult:
    return EpisodeResult(
        id=record.id,
        status=EpisodeStatus.completed,
        mode=record.request.mode,
        reward=outcome.reward,
        passed=outcome.passed,
        verdict=outcome.verdict,
        tests=outcome.tests,
        stdout=test["stdout"] if test else "",
        stderr=test["stderr"] if test else outcome.reason,
        stdout_truncated=bool(test and test["stdout_truncated"]),
        stderr_truncated=bool(test and test["stderr_truncated"]),
        exit_code=test["exit_code"] if test else None,
        reason=reason or outcome.reason,
        timings=timings,
        sandbox=info,
        steps=steps,
        step_rewards=[s.reward for s in steps],
        metadata=record.request.metadata,
        created_at=datetime.fromtimestamp(record.created, UTC),
        finished_at=datetime.now(UTC),
    )
