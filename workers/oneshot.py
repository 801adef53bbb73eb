"""A one-shot episode: task files and solution in, hidden tests run, reward out.

The whole episode is one runner program, one line to its sandbox's root server (a fresh
container's or a pooled one's): write the task's files, run its setup, write the solution
and play its actions, kill every process the solution left, seal the workspace, copy the
hidden tests in and run them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from core.endings import infra_failure, task_error
from core.store import EpisodeRecord
from proctor.models import (
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    Isolation,
    SandboxInfo,
    Step,
    Timings,
)
from workers.actions import action_op, observation_of
from workers.evaluation.compile_cache import settings_cache, store, with_cache
from workers.evaluation.grading import grading_plan, is_protected, steering_paths
from workers.grading_tail import grade_reply
from workers.guard import solution_text
from workers.runtime import Runtime
from workers.sandbox.protocol import Op, Results, Run, RunResult, Sent, Write, commands_time_s
from workers.sandbox.sandbox import RunnerBroken

log = logging.getLogger(__name__)


def run_oneshot(rt: Runtime, record: EpisodeRecord) -> EpisodeResult | None:
    """Run one one-shot episode; None when it had already ended (cancelled) on pickup."""
    request = record.request
    task = request.task
    solution = request.solution
    assert solution is not None
    started = time.time()
    queued_s = max(started - record.created, 0.0)
    if not rt.store.advance(record.id, EpisodeStatus.starting, worker=rt.worker, host=rt.host):
        return None
    acquire_started = time.monotonic()
    sandbox, warm = rt.open_sandbox(task, episode_id=record.id)
    sandbox_start_s = time.monotonic() - acquire_started
    container = sandbox.container
    spec = container.spec
    log.info(
        "episode %s container %s: started (%s)",
        record.id,
        container.name,
        "warm" if warm else "cold",
    )
    info = SandboxInfo(
        image=spec.image,
        image_digest=rt.engine.image_digest(spec.image),
        host=rt.host,
        network=spec.network,
        isolation=Isolation.pooled if spec.pooled else Isolation.container,
    )
    rt.holding[record.id] = container.id
    try:
        rt.store.advance(record.id, EpisodeStatus.running, container=container.name)
        limits = task.limits
        # preparing: the task's files and setup (their failure is the task's, not ours)
        prepare: list[Op[Any]] = [Write(files=task.files)] if task.files else []
        setup = [
            Run(
                command=command,
                timeout_s=limits.timeout_s,
                output_bytes=limits.output_bytes,
                check=True,
            )
            for command in task.setup
        ]
        prepare += setup
        if solution.files:
            prepare.append(Write(files=solution.files))
        # an action that fails (its fork refused, its file unwritable) must not skip grading
        actions = [
            action_op(
                a,
                output_bytes=limits.output_bytes,
                persistent_shell=False,
                max_timeout_s=rt.settings.max_episode_s,
                keep_going=True,
            )
            for a in solution.actions
        ]
        plan = grading_plan(
            task,
            keep=steering_paths(task.files) | steering_paths(task.tests.files),
            restore={p: c for p, c in task.files.items() if is_protected(p, task.protected_paths)},
            split=sandbox.root_server,
        )
        compiled_programs = settings_cache(rt.settings)
        plan, to_store = with_cache(compiled_programs, plan, task, solution, info.image_digest)
        counted = (Sent(), Sent())  # packets sent before and after: any contact at all?
        ops = [counted[0], *prepare, *actions, *plan.ops, counted[1]]
        # admission kept the sum within max_episode_s; a worker set lower holds its own
        budget = min(commands_time_s(ops), rt.settings.max_episode_s) + 5.0
        wall_started = time.time()
        run_started = time.monotonic()
        reply: Results | RunnerBroken
        try:
            reply = sandbox.program(ops, timeout_s=budget)
        except RunnerBroken as exc:  # the tail gives it its typed verdict
            reply = exc
        run_s = time.monotonic() - run_started
        steps: list[Step] = []
        evidence: list[Evidence] = []
        sent = None
        if isinstance(reply, Results):
            steps = [
                Step(
                    step=i + 1,
                    action=action,
                    observation=observation_of(action, reply.get(op), reply.error),
                )
                for i, (action, op) in enumerate(zip(solution.actions, actions, strict=True))
            ]
            setup_failed = next(
                (
                    r
                    for r in map(reply.result, setup)
                    if isinstance(r, RunResult) and r.exit_code != 0
                ),
                None,
            )
            if setup_failed is not None:
                error = "the task's setup command failed: " + setup_failed.stderr[-500:]
                log.warning("episode %s: %s", record.id, error)
                if setup_failed.timed_out or setup_failed.oom_killed:  # the host's, maybe
                    return infra_failure(record, error, sandbox=info)
                return task_error(record, error, sandbox=info)  # before the solution was written
            # an operation of the preparation stops the program: nothing of the solution ran
            if not all(map(reply.ran, prepare)):
                why = reply.error.message if reply.error else None
                error = f"the task could not be prepared: {why}"
                log.warning("episode %s: %s", record.id, error)
                return infra_failure(record, error, sandbox=info)
            evidence = rt.guard.screen_solution(record)
            sent = reply.sent(*counted)
            store(compiled_programs, to_store, reply)
        timings = Timings(
            queued_s=queued_s,
            sandbox_start_s=sandbox_start_s,
            run_s=run_s,
            total_s=time.time() - record.created,
        )
        return grade_reply(
            rt,
            record,
            reply,
            sandbox=sandbox,
            plan=plan,
            steps=steps,
            info=info,
            timings=timings,
            evidence=evidence,
            sent=sent,
            since=wall_started,
            trajectory=solution_text(solution.files),
        )
    finally:
        rt.holding.pop(record.id, None)
        rt.close_sandbox(sandbox)
