"""A one-shot episode: task files and solution in, hidden tests run, reward out.

The whole episode is one runner program (one `docker exec`): write the task's files, run
its setup, write the solution and play its actions, kill every process the solution left,
seal the workspace, copy the hidden tests in and run them.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from proctor.models import (
    Action,
    BashAction,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    ReadFileAction,
    SandboxInfo,
    Step,
    Timings,
    Verdict,
    WriteFileAction,
)
from service.store import EpisodeRecord
from workers.anticheat.guard import apply_policy, solution_text
from workers.evaluation.grading import grading_plan, steering_paths
from workers.evaluation.scoring import Score, TestRun, score
from workers.runtime import Runtime
from workers.sandbox.sandbox import RunnerBroken, Sandbox

log = logging.getLogger(__name__)


def action_op(action: Action, *, output_bytes: int) -> dict[str, Any]:
    if isinstance(action, BashAction):
        return {
            "op": "run", "command": action.command, "timeout_s": action.timeout_s,
            "output_bytes": output_bytes,
            "env": {"HOME": "/home/sandbox", "LANG": "C.UTF-8"},
        }
    if isinstance(action, WriteFileAction):
        return {"op": "write", "files": {action.path: action.content}}
    assert isinstance(action, ReadFileAction)
    return {"op": "read", "paths": [action.path], "max_bytes": output_bytes}


def observation_of(action: Action, result: dict[str, Any] | None, error: str | None) -> Observation:
    if result is None:
        return Observation(stderr=error or "not run", exit_code=1)
    if isinstance(action, BashAction):
        return Observation(
            output=result["stdout"], stderr=result["stderr"], exit_code=result["exit_code"],
            truncated=result["stdout_truncated"] or result["stderr_truncated"],
            timed_out=result["timed_out"], duration_s=result["duration_s"],
        )
    if isinstance(action, ReadFileAction):
        content = next(iter(result["files"].values()), None)
        if content is None:
            return Observation(stderr=f"{action.path}: No such file or directory", exit_code=1)
        return Observation(output=content, exit_code=0)
    return Observation(exit_code=0)


def infra_failure(record: EpisodeRecord, message: str, **extra: Any) -> EpisodeResult:
    base = record.public().model_dump()
    base.update(
        status=EpisodeStatus.failed, verdict=Verdict.infra_error, reward=None, passed=None,
        error=message, finished_at=datetime.now(UTC), **extra,
    )
    return EpisodeResult.model_validate(base)


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
    spec = rt.spec_for(task)
    acquire_started = time.monotonic()
    container, warm = rt.pool.acquire(spec)
    sandbox_start_s = time.monotonic() - acquire_started
    sandbox = Sandbox(rt.engine, container, episode_id=record.id)
    log.info("episode %s container %s: started (%s)", record.id, container.name,
             "warm" if warm else "cold")
    info = SandboxInfo(image=spec.image, image_digest=rt.engine.image_digest(spec.image),
                       host=rt.host, network=spec.network)
    try:
        rt.store.advance(record.id, EpisodeStatus.running, container=container.name)
        limits = task.limits
        ops: list[dict[str, Any]] = []
        if task.files:
            ops.append({"op": "write", "files": task.files})
        for command in task.setup:
            ops.append({"op": "run", "command": command, "timeout_s": limits.timeout_s,
                        "output_bytes": limits.output_bytes, "check": True})
        if solution.files:
            ops.append({"op": "write", "files": solution.files})
        first_action = len(ops)
        ops += [action_op(a, output_bytes=limits.output_bytes) for a in solution.actions]
        plan = grading_plan(
            task,
            keep=steering_paths(task.files) | steering_paths(task.tests.files),
            restore={p: c for p, c in task.files.items() if _protected(p, task.protected_paths)},
        )
        grading_index = len(ops) + next(
            i for i, op in enumerate(plan.ops) if op["op"] == "run"
        )
        ops += plan.ops
        budget = sum(float(op.get("timeout_s", 0)) for op in ops) + 5.0
        wall_started = time.time()
        run_started = time.monotonic()
        reply = sandbox.program(ops, timeout_s=budget)
        run_s = time.monotonic() - run_started
        results = reply.results
        steps = [
            Step(step=i + 1, action=action,
                 observation=observation_of(action, _at(results, first_action + i), reply.error))
            for i, action in enumerate(solution.actions)
        ]
        setup_failed = next(
            (r for r in results[: len(task.setup) + (1 if task.files else 0)]
             if r.get("exit_code") not in (None, 0)), None)
        if setup_failed is not None:
            return infra_failure(record, "the task's setup command failed: "
                                 + setup_failed["stderr"][-500:], sandbox=info)
        test = _at(results, grading_index)
        if test is None:
            if reply.error and "write failed" in reply.error:
                raise RunnerBroken(reply.error)
            return infra_failure(record, f"grading did not run: {reply.error}", sandbox=info)
        oom = test["oom_killed"] or (test["exit_code"] in (-9, 137) and sandbox.oom_killed())
        outcome = score(
            TestRun(exit_code=test["exit_code"], timed_out=test["timed_out"],
                    oom_killed=oom, report_xml=test.get("report"), stderr=test["stderr"]),
            task.tests, task.scoring,
        )
        result = _result(record, outcome, test, steps, info,
                         Timings(queued_s=queued_s, sandbox_start_s=sandbox_start_s,
                                 run_s=run_s, total_s=time.time() - record.created))
        evidence = rt.guard.screen_solution(record)
        evidence += rt.guard.network_evidence(sandbox, since=wall_started)
        judged, judge_status = rt.guard.judge_trajectory(
            record, steps, solution_text(solution.files))
        return apply_policy(record, result, evidence + judged, judge_status)
    except RunnerBroken as exc:
        outcome = Score(Verdict.runtime_error, 0.0, False, reason=str(exc))
        return _result(record, outcome, None, [], info,
                       Timings(queued_s=queued_s, sandbox_start_s=sandbox_start_s,
                               total_s=time.time() - record.created))
    finally:
        rt.pool.discard(container)


def _at(results: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
    return results[index] if index < len(results) else None


def _protected(path: str, protected: list[str]) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in protected)


def _result(
    record: EpisodeRecord,
    outcome: Score,
    test: dict[str, Any] | None,
    steps: list[Step],
    info: SandboxInfo,
    timings: Timings,
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
        reason=outcome.reason,
        timings=timings,
        sandbox=info,
        steps=steps,
        step_rewards=[0.0] * len(steps),
        metadata=record.request.metadata,
        created_at=datetime.fromtimestamp(record.created, UTC),
        finished_at=datetime.now(UTC),
    )
