"""Running a trainer's samples as episodes and answering before its client gives up.

What the adapters share: every slot of the answer is a result or an error, never missing,
and the answer comes within the deadline, whatever the queue or the workers do.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from anyio import to_thread
from redis.exceptions import RedisError

from core.defaults import ADAPTER_START_MARGIN_S
from proctor.integrations.codetasks import GroundTruthError
from proctor.models import EpisodeCreate, EpisodeResult
from service.deps import Resources
from service.episodes import (
    end_at_deadline,
    seal_repository,
    validate_request,
    wait_for_public,
)
from service.errors import ApiError
from service.overload import patience_s
from service.repos import resolve_ref

log = logging.getLogger(__name__)


def _clamped(episode: EpisodeCreate, limit_s: float) -> EpisodeCreate:
    limits = episode.task.limits
    if limits.timeout_s <= limit_s:
        return episode
    task = episode.task.model_copy(
        update={"limits": limits.model_copy(update={"timeout_s": limit_s})}
    )
    return episode.model_copy(update={"task": task})


async def run_within(
    resources: Resources, items: list[EpisodeCreate | Exception], deadline_s: float
) -> list[EpisodeResult | Exception]:
    """Run the episodes and answer within `deadline_s`, each slot a result or an error.

    Time limits are cut so an episode ends as `timeout` inside the deadline; one still
    unfinished at the deadline is ended: `timeout` if it was running, `infra_error` if it
    never got a sandbox (a backlog is our failure, not the answer's). The queue's wait bound
    is the client's own patience here (`service.overload`): refused only when the queue
    ahead is longer than the client waits, as `Overloaded` in every slot.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    limit_s = max(
        1.0,
        min(
            deadline_s - min(ADAPTER_START_MARGIN_S, 0.4 * deadline_s),
            resources.settings.max_episode_s,
        ),
    )
    slots: list[EpisodeResult | Exception | None] = []  # None: waits for its episode
    valid: list[EpisodeCreate] = []
    for item in items:
        if isinstance(item, Exception):
            slots.append(item)
            continue
        episode = _clamped(item, limit_s)
        try:
            validate_request(resources, episode)
            if episode.task.repo is not None:  # sealing is all a thread would do
                episode = await to_thread.run_sync(seal_repository, episode)
                episode = await to_thread.run_sync(resolve_ref, resources, episode)
        except ApiError as exc:  # the task asks what this deployment lacks: the data's fault
            slots.append(GroundTruthError(exc.message))
            continue
        valid.append(episode)
        slots.append(None)
    ended: list[EpisodeResult | Exception] = []
    try:
        ids: list[str] = []
        if valid:
            await to_thread.run_sync(resources.images.check, valid)
            # held rather than refused: admitted if it would start in time to end in time
            slowest = max(e.task.limits.timeout_s for e in valid)
            margin = min(ADAPTER_START_MARGIN_S, 0.4 * deadline_s)
            patience = patience_s(deadline - loop.time(), slowest, margin)
            submit = partial(resources.queue.submit, valid, patience_s=patience)
            ids = await to_thread.run_sync(submit)
    except (ApiError, RedisError) as exc:  # no worker, backpressure, Redis: say so in the body
        log.warning("adapter: could not enqueue %d episodes: %s", len(valid), exc)
        ids, ended = [], [exc] * len(valid)
    remaining = max(deadline - loop.time(), 0.1)
    publics = await asyncio.gather(*(wait_for_public(resources, i, remaining) for i in ids))
    for episode_id, public in zip(ids, publics, strict=True):
        if public is not None and public.status.terminal:
            ended.append(public)
        else:
            ended.append(await to_thread.run_sync(end_at_deadline, resources, episode_id))
    results = iter(ended)
    return [next(results) if slot is None else slot for slot in slots]
