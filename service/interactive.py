"""Interactive episodes: one action at a time, then finish.

Each action or finish is a job on the queue of the host that holds the episode's
container; the API blocks on a reply key the worker pushes to (no polling). Actions of
one episode are serialized: a second action while one is running is a 409, as a terminal
would refuse.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from anyio import to_thread

from core import endings, keys
from core.config import Settings
from core.defaults import (
    FILE_ACTION_S,
    FINISH_MARGIN_S,
    NO_REPLY_RETRY_AFTER_S,
    REPLY_MARGIN_S,
)
from core.queues import FINISH_EPISODE, RUN_ACTION
from core.store import EpisodeRecord
from proctor.models import (
    Action,
    BashAction,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    GiveUpAction,
    InteractiveAction,
    Observation,
    ReadFileAction,
    StepResult,
    WriteFileAction,
    check_relative_path,
)
from service.admission import admit_action
from service.deps import Resources
from service.errors import ApiError, BadRequest, Conflict, NotFound, ServiceUnavailable


def longest_reply_wait_s(settings: Settings) -> float:
    """The longest an action or a finish may wait for its worker's reply."""
    longest_action_s = float(BashAction.model_json_schema()["properties"]["timeout_s"]["maximum"])
    return max(longest_action_s + REPLY_MARGIN_S, settings.max_episode_s + FINISH_MARGIN_S)


def running_interactive(resources: Resources, episode_id: str) -> EpisodeRecord:
    record = resources.store.get(episode_id)
    if record is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    if record.request.mode is not EpisodeMode.interactive:
        raise Conflict(f"episode {episode_id} is one-shot; it takes no actions")
    if record.status is not EpisodeStatus.running:
        raise Conflict(f"episode {episode_id} is {record.status.value}, not running")
    return record


def checked_action(action: Action) -> Action:
    """Paths must stay in the workspace (relative, or absolute under /workspace)."""
    if isinstance(action, WriteFileAction | ReadFileAction):
        path = (
            action.path.removeprefix("/workspace/")
            if action.path.startswith("/workspace/")
            else action.path
        )
        try:
            check_relative_path(path)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
    return action


async def await_reply(resources: Resources, key: str, timeout_s: float) -> Any:
    reply = await resources.replies.wait(key, timeout_s)
    if reply is None:
        raise ServiceUnavailable(
            f"no worker answered within {timeout_s:.0f}s; the episode's host may be down",
            headers={"Retry-After": str(NO_REPLY_RETRY_AFTER_S)},
        )
    if reply["status"] != 200:
        error = ApiError(reply.get("message") or "the worker refused the request")
        error.status_code = int(reply["status"])
        raise error
    return reply["body"]


async def act(resources: Resources, episode_id: str, action: InteractiveAction) -> StepResult:
    """Run one action in the episode's sandbox, on the host that holds it; its result.

    The worker's own refusals (404, 409, 503) and failures (500) are raised as they are.
    """
    if isinstance(action, GiveUpAction):
        return await give_up(resources, episode_id, action)
    action = checked_action(action)
    admit_action(action, resources.settings)
    record = await to_thread.run_sync(running_interactive, resources, episode_id)
    timeout_s = action.timeout_s if isinstance(action, BashAction) else FILE_ACTION_S
    lock = keys.acting(episode_id)
    if not await resources.aredis.set(lock, "1", nx=True, ex=int(timeout_s + REPLY_MARGIN_S)):
        raise Conflict(f"episode {episode_id} is still running its previous action")
    try:
        key = keys.reply(uuid.uuid4().hex)
        # an action that starts later than this could end after the reply is no longer
        # awaited: the worker answers 503 instead of running it (a retry must not run twice)
        start_by = time.time() + REPLY_MARGIN_S
        await to_thread.run_sync(
            lambda: resources.queue.to_host(
                record.started_sandbox().host,
                RUN_ACTION,
                [episode_id, action.model_dump(mode="json"), key, start_by],
                timeout_s=timeout_s,
            ),
        )
        body = await await_reply(resources, key, timeout_s + REPLY_MARGIN_S)
    finally:
        await resources.aredis.delete(lock)
    return StepResult.model_validate(body)


async def give_up(resources: Resources, episode_id: str, action: GiveUpAction) -> StepResult:
    """End the episode as the agent asked: `gave_up`, the policy's reward, no grading. Ended
    here, as a cancel is; the worker holding the sandbox sees it ended and removes it."""
    record = await to_thread.run_sync(running_interactive, resources, episode_id)
    lock = keys.acting(episode_id)
    if not await resources.aredis.set(lock, "1", nx=True, ex=int(FILE_ACTION_S + REPLY_MARGIN_S)):
        raise Conflict(f"episode {episode_id} is still running its previous action")

    def end() -> EpisodeResult:
        steps = resources.store.steps(episode_id)
        result = endings.gave_up(record, action.reason, steps)
        if not resources.store.finish(result, request=record.request):
            raise Conflict(f"episode {episode_id} ended before it could give up")
        return result

    try:
        result = await to_thread.run_sync(end)
    finally:
        await resources.aredis.delete(lock)
    observation = Observation(output=result.reason, exit_code=0)
    return StepResult(id=episode_id, step=len(result.steps), observation=observation, done=True)


async def finish(resources: Resources, episode_id: str) -> EpisodeResult:
    """Grade the episode's workspace and end it; its result."""
    record = await to_thread.run_sync(running_interactive, resources, episode_id)
    timeout_s = record.request.task.limits.timeout_s + FINISH_MARGIN_S
    key = keys.reply(uuid.uuid4().hex)
    await to_thread.run_sync(
        lambda: resources.queue.to_host(
            record.started_sandbox().host, FINISH_EPISODE, [episode_id, key], timeout_s=timeout_s
        ),
    )
    return EpisodeResult.model_validate(await await_reply(resources, key, timeout_s))
