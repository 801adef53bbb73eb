"""From a grading runner's reply to the result a trainer reads, and its writing: the same
steps for a one-shot and an interactive episode, whatever each did before.

The tail: the compile step's failure or the tests' score (out of memory by the run's own
account or by the engine's of the sandbox), the runtime defences' evidence, files grading
removed, the honeypot's record, the judge's reading, the reward policy; a runner the code
under test broke gets its typed verdict instead. Writing the result waits out a Redis
outage, so a graded result is never turned into `infra_error` by one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import RedisError

from core import defaults
from core.store import EpisodeRecord, EpisodeStore
from proctor.models import EpisodeResult, Evidence, SandboxInfo, Step, Timings
from workers.evaluation.fetch import fetched
from workers.evaluation.grading import GradingPlan
from workers.guard import added_evidence, apply_policy
from workers.runtime import Runtime
from workers.sandbox.protocol import Results, RunResult
from workers.sandbox.sandbox import RunnerBroken, Sandbox
from workers.scored_results import (
    broken_result,
    compile_failed,
    compile_failed_result,
    graded_result,
    score_compile,
    score_test_run,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
REDIS_BACKOFF_S = defaults.RESULT_RETRY_BACKOFF_S  # first and longest wait between attempts
KILLED_STATUSES = (-9, 137)  # SIGKILLed, as the runner or a shell reports it


def grade_reply(
    rt: Runtime,
    record: EpisodeRecord,
    reply: Results | RunnerBroken,
    *,
    sandbox: Sandbox,
    plan: GradingPlan,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
    evidence: list[Evidence],
    sent: int | None,
    since: float,
    trajectory: str,
    reason: str | None = None,
    graded_at: float | None = None,
) -> EpisodeResult:
    """The scored result of the program that ran `plan` (its reply, or how its runner
    broke). `evidence`: what the episode's mode found itself; `sent`: packets the sandbox
    sent meanwhile (None: not counted); `since`: when its network contacts count from, each
    on the step during which it was made until `graded_at`, when the agent's time ended;
    `trajectory`: what the judge reads beside the steps (the solution, or the agent's diff).
    Raises `SandboxError` when the runner failed for a reason of ours."""
    try:
        if isinstance(reply, RunnerBroken):
            raise reply
        result = _scored(rt, record, reply, sandbox, plan, steps, info, timings, reason)
        evidence = evidence + added_evidence(plan.removed(reply))
    except RunnerBroken as exc:  # the code under test broke the sandbox: its typed verdict,
        # judged with what was found before it broke (a cheat that then exhausted its memory
        # still pays the cheat reward; the steps' attempts stay on record)
        result = broken_result(record, exc.failure, steps, info, timings)
    contacts_on = steps if graded_at is not None else ()  # the agent's steps, interactive
    evidence += rt.guard.network_evidence(
        sandbox, since=since, sent=sent, steps=contacts_on, graded_at=graded_at
    )
    judged, judge_status = rt.guard.judge_trajectory(record, steps, trajectory)
    final = apply_policy(record, result, evidence + judged, judge_status)
    files = fetched(record.request.task, plan.fetch, reply) if isinstance(reply, Results) else {}
    return final.model_copy(update={"files": files}) if files else final


def _scored(
    rt: Runtime,
    record: EpisodeRecord,
    reply: Results,
    sandbox: Sandbox,
    plan: GradingPlan,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
    reason: str | None,
) -> EpisodeResult:
    task = record.request.task
    compiled = reply.result(plan.compile) if plan.compile is not None else None
    if compiled is not None:
        timings = timings.model_copy(update={"compile_s": compiled.duration_s})
    if compiled is not None and compile_failed(compiled):
        outcome = score_compile(compiled, task, oom_killed=oom_killed(sandbox, compiled))
        return compile_failed_result(record, outcome, compiled, steps, info, timings)
    test = reply.result(plan.test)
    if test is None:  # an operation of the grading phase raised: whose fault was it?
        raise sandbox.failure_of(reply)
    outcome = score_test_run(test, task, oom_killed=oom_killed(sandbox, test), split=plan.split)
    return graded_result(record, outcome, test, steps, info, timings, reason=reason)


def oom_killed(sandbox: Sandbox, run: RunResult) -> bool:
    """Whether the kernel killed the run for memory: the runner saw it in the memory
    cgroup's count, or the run was SIGKILLed and the engine says the sandbox hit its limit
    (a count the runner could not read, under gVisor say)."""
    return run.oom_killed or (run.exit_code in KILLED_STATUSES and sandbox.oom_killed())


def until_redis_answers(what: str, call: Callable[[], T]) -> T:
    """`call()`, again and again (with a backoff) while Redis is unreachable."""
    wait, longest = REDIS_BACKOFF_S
    while True:
        try:
            return call()
        except RedisError as exc:
            log.warning("%s: Redis does not answer (%s); retrying in %.1f s", what, exc, wait)
            time.sleep(wait)
            wait = min(wait * 2, longest)


def write_result(
    store: EpisodeStore, result: EpisodeResult, record: EpisodeRecord | None = None
) -> bool:
    """Write a terminal result, however long Redis is away; False if it had ended first."""
    request = record.request if record is not None else None
    return until_redis_answers(
        f"episode {result.id}: writing the result",
        lambda: store.finish(result, request=request),
    )
