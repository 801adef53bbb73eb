"""Interactive episodes: a sandbox the trainer drives one action at a time.

Start (on any worker): take a warm container, unpack and sanitize the repository, write
the task's files, run its setup, remember what must be restored at the end (protected
paths, the task's own pytest configuration), and answer with the first observation.
Actions and the finish run on the host that holds the container (its own queue), each in
one runner exec. Shell state (working directory, exported variables) lives in a state
file that every bash action loads before and saves after the command, as a shell would.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from anticheat.git.sanitize import bundle_script, sanitize_script
from core.endings import infra_failure, task_error
from core.store import EpisodeRecord, SandboxState
from proctor.models import (
    Action,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    Observation,
    RepoSnapshot,
    SandboxInfo,
    Step,
    StepResult,
    Timings,
)
from workers.actions import action_op, observation_of
from workers.evaluation.grading import (
    STEERING_FILES,
    grading_plan,
    is_protected,
    steering_paths,
)
from workers.grading_tail import grade_reply, until_redis_answers, write_result
from workers.guard import integrity_evidence
from workers.repos import RepoUnusable, link_script, sealed_repo
from workers.runtime import Runtime
from workers.sandbox.engine import Container, SandboxError
from workers.sandbox.protocol import (
    Find,
    KillAll,
    Listing,
    Op,
    Results,
    Run,
    Sent,
    Snapshot,
    Untar,
    Write,
    commands_time_s,
)
from workers.sandbox.sandbox import RunnerBroken, Sandbox

log = logging.getLogger(__name__)

ACTION_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)
BUNDLE_PATH = "/tmp/.proctor-repo.bundle"
HISTORY_FOR_JUDGE = 8
DIFF_BYTES = 60_000


@dataclass(frozen=True, slots=True)
class Preparation:
    """The start-up program, and the operations whose results make the episode's state."""

    ops: list[Op[Any]]
    checked: list[Run]  # the repository's sanitizing and the task's setup
    setup: list[Run]  # the task's setup alone: its failure is the task's
    found: Find  # steering files the task's own tree has
    snapshot: Snapshot  # protected paths as the task left them
    listing: Listing  # the first observation


def preparation(record: EpisodeRecord, repo: RepoSnapshot | None) -> Preparation:
    """`repo`: the task's repository, sealed (`workers.repos.sealed_repo`)."""
    task = record.request.task
    setup_timeout = max(task.limits.timeout_s, 60.0)

    def checked_run(command: str) -> Run:
        return Run(command=command, timeout_s=setup_timeout, output_bytes=8192, check=True)

    ops: list[Op[Any]] = []
    checked: list[Run] = []
    if repo is not None:
        if repo.archive is not None:
            ops.append(Untar(data=repo.archive))
            sanitize = checked_run(sanitize_script(repo))
        else:
            assert repo.bundle is not None  # sealed: an archive; else a bundle
            ops.append(Write(root="/tmp", binary={BUNDLE_PATH.removeprefix("/tmp/"): repo.bundle}))
            sanitize = checked_run(bundle_script(repo, BUNDLE_PATH))
        ops.append(sanitize)
        checked.append(sanitize)
        if task.repo is not None and task.repo.path is not None:  # baked: link it at its path
            link = checked_run(link_script(task.repo.path))
            ops.append(link)
            checked.append(link)
    if task.files:
        ops.append(Write(files=task.files))
    setup = [checked_run(command) for command in task.setup]
    ops += setup
    checked += setup
    found = Find(names=list(STEERING_FILES))
    snapshot = Snapshot(paths=task.protected_paths)
    listing = Listing()
    return Preparation(
        ops=[*ops, found, snapshot, listing],
        checked=checked,
        setup=setup,
        found=found,
        snapshot=snapshot,
        listing=listing,
    )


def start_interactive(rt: Runtime, record: EpisodeRecord) -> EpisodeResult | None:
    """Make the sandbox ready; None when the episode is now running (or already ended)."""
    task = record.request.task
    if not rt.store.advance(record.id, EpisodeStatus.starting, worker=rt.worker, host=rt.host):
        return None
    spec = rt.spec_for(task)
    acquired = time.monotonic()
    try:
        repo = sealed_repo(rt, task, episode_id=record.id)
    except RepoUnusable as exc:
        log.info("episode %s: the task's repository is unusable: %s", record.id, exc)
        return task_error(record, f"the task's repository cannot be used: {exc}")
    except SandboxError as exc:
        return infra_failure(record, f"the task's repository could not be prepared: {exc}")
    container, warm = rt.warm_pool.acquire(spec)
    sandbox = Sandbox(rt.engine, container, episode_id=record.id)
    keep_container = False
    try:
        prep = preparation(record, repo)
        reply = sandbox.program(prep.ops, timeout_s=commands_time_s(prep.ops))
        failed = next(
            (r for r in map(reply.result, prep.checked) if r is not None and r.exit_code != 0), None
        )
        found, snapshot = reply.result(prep.found), reply.result(prep.snapshot)
        listing = reply.result(prep.listing)
        task_failed = next(
            (r for r in map(reply.result, prep.setup) if r is not None and r.exit_code != 0), None
        )
        if task_failed is not None and not (task_failed.timed_out or task_failed.oom_killed):
            # the task's own setup, before any action: the task's fault, not the agent's nor ours
            error = "the task's setup command failed: " + task_failed.stderr[-800:]
            return task_error(record, error)
        if reply.error or failed or found is None or snapshot is None or listing is None:
            detail = reply.error.message if reply.error else failed.stderr[-800:] if failed else ""
            return infra_failure(record, f"the task could not be prepared: {detail}")
        ready_s = time.monotonic() - acquired
        observation = Observation(output=listing.stdout, exit_code=0, duration_s=round(ready_s, 4))
        state = SandboxState(
            host=rt.host,
            container_id=container.id,
            container_name=container.name,
            container_ip=container.ip,
            keep=frozenset(found.paths) | steering_paths(task.files),
            restore={
                **snapshot.contents(),
                **{p: c for p, c in task.files.items() if is_protected(p, task.protected_paths)},
            },
            observation=observation,
            sandbox_start_s=ready_s,
            warm=warm,
        )
        keep_container = rt.store.start_sandbox(record.id, state)
        if keep_container:
            rt.holding[record.id] = container.id
            log.info(
                "episode %s container %s: ready in %.3fs (%s)",
                record.id,
                container.name,
                ready_s,
                "warm" if warm else "cold",
            )
        return None
    except RunnerBroken as exc:
        return infra_failure(record, f"the task could not be prepared: {exc}")
    finally:
        if not keep_container:
            rt.warm_pool.discard(container)


def _sandbox(rt: Runtime, record: EpisodeRecord) -> Sandbox:
    spec = rt.spec_for(record.request.task, pull=False)  # its sandbox runs already
    state = record.started_sandbox()
    container = Container(
        id=state.container_id, name=state.container_name, spec=spec, ip=state.container_ip
    )
    return Sandbox(rt.engine, container, episode_id=record.id)


def _live(rt: Runtime, episode_id: str, reply_key: str) -> EpisodeRecord | None:
    record = rt.store.get(episode_id)
    if record is None:
        rt.store.reply(reply_key, status=404, message=f"no episode {episode_id!r}")
        return None
    if record.status is not EpisodeStatus.running:
        rt.store.reply(
            reply_key,
            status=409,
            message=f"episode {episode_id} is {record.status.value}, not running",
        )
        return None
    return record


def run_action(rt: Runtime, episode_id: str, action_json: dict[str, Any], reply_key: str) -> None:
    record = _live(rt, episode_id, reply_key)
    if record is None:
        return
    action = ACTION_ADAPTER.validate_python(action_json)
    task = record.request.task
    started = time.time()
    rt.store.touch(episode_id, at=started)
    sandbox = _sandbox(rt, record)
    history = rt.store.steps(episode_id, last=HISTORY_FOR_JUDGE)
    screened, verdict = rt.guard.screen_action(sandbox, record, action, history)
    if screened is not None and screened.intercepted:
        step = screened
        log.info("episode %s: step intercepted by %s", episode_id, verdict.rule)
    else:
        op = action_op(
            action,
            output_bytes=task.limits.output_bytes,
            persistent_shell=True,
            max_timeout_s=rt.settings.max_episode_s,
        )
        try:
            reply = sandbox.program([op], timeout_s=op.timeout_s if isinstance(op, Run) else 10.0)
            observation = observation_of(action, reply.get(op) or reply.error, reply.error)
        except RunnerBroken as exc:
            observation = Observation(stderr=str(exc), exit_code=137)
        # it ran: with the judge's review, or as an attempt when no judge decided one
        step = (screened or Step(step=0, action=action, observation=observation)).model_copy(
            update={"observation": observation, "started_at": started}
        )
    step = rt.store.add_step(episode_id, step)
    answer = StepResult(id=episode_id, step=step.step, observation=step.observation)
    rt.store.reply(reply_key, body=answer.model_dump(mode="json"))


def finish_interactive(
    rt: Runtime, episode_id: str, reply_key: str | None, *, reason: str | None = None
) -> EpisodeResult | None:
    """Kill the agent's processes, seal, run the hidden tests, score, remove the sandbox."""
    record = rt.store.get(episode_id) if reply_key is None else _live(rt, episode_id, reply_key)
    if record is None or record.status is not EpisodeStatus.running:
        return None
    if not rt.store.advance(episode_id, EpisodeStatus.evaluating):
        return None
    task = record.request.task
    sandbox = _sandbox(rt, record)
    steps = rt.store.steps(episode_id)
    info = SandboxInfo(
        image=sandbox.container.spec.image,
        image_digest=rt.engine.image_digest(sandbox.container.spec.image),
        host=rt.host,
        network=sandbox.container.spec.network,
    )
    try:
        state = record.started_sandbox()
        restore = dict(state.restore)
        plan = grading_plan(task, keep=set(state.keep), restore=restore)
        # before sealing: what the agent left in protected paths, and its diff for the judge
        protected = Snapshot(paths=task.protected_paths)
        # the packets sent in its network namespace (a holder's: earlier sandboxes' too,
        # which only costs a read of the honeypot's log): any contact at all?
        counted = Sent()
        looks: list[Op[Any]] = [KillAll(), protected, counted]
        diff_op = None
        if task.repo is not None:
            diff_op = Run(
                output_bytes=DIFF_BYTES,
                timeout_s=30,
                command="git -c core.hooksPath=/dev/null add -A -N . >/dev/null "
                f"2>&1; git --no-pager diff {task.repo.base_commit}",
            )
            looks.append(diff_op)
        run_started, grading_started = time.monotonic(), time.time()
        reply: Results | RunnerBroken
        try:
            reply = sandbox.program(looks + plan.ops, timeout_s=plan.timeout_s + 40, reclaim=True)
            if not all(map(reply.ran, looks)):  # an operation raised: whose fault was it?
                raise sandbox.failure_of(reply)
        except RunnerBroken as exc:  # the tail gives it its typed verdict
            reply = exc
        run_s = time.monotonic() - run_started
        evidence: list[Evidence] = []
        diff, sent = "", None
        if isinstance(reply, Results):
            left = snapshot.contents() if (snapshot := reply.result(protected)) else {}
            if diff_op is not None and (diff_result := reply.result(diff_op)) is not None:
                diff = diff_result.stdout
            evidence = integrity_evidence(
                {p: c for p, c in restore.items() if is_protected(p, task.protected_paths)}, left
            )
            sent = result_sent.packets if (result_sent := reply.result(counted)) else None
        timings = Timings(
            sandbox_start_s=state.sandbox_start_s,
            run_s=run_s,
            total_s=time.time() - record.created,
        )
        result = grade_reply(
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
            since=record.created,
            trajectory=diff,
            reason=reason,
            graded_at=grading_started,
        )
    except SandboxError as exc:
        result = infra_failure(record, f"grading failed: {exc}", steps=steps, sandbox=info)
    finally:
        rt.engine.remove(sandbox.container.id)
        rt.holding.pop(episode_id, None)
    write_result(rt.store, result, record)
    if reply_key is not None:
        body = result.model_dump(mode="json")
        until_redis_answers(
            f"episode {episode_id}: answering the finish",
            lambda: rt.store.reply(reply_key, body=body),
        )
    return result
