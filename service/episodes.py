"""Episodes: submit (one or a batch), read, wait for the end, cancel, end at a deadline.

The operations the routes and the trainer adapters call; they raise `service.errors` (the
one handler maps those to HTTP) and never build an HTTP response themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anyio import to_thread

from anticheat.git.seal import SealRefused, SealUnavailable, seal
from core import results
from core.defaults import INLINE_DECODE_BYTES, INTERACTIVE_START_S
from core.store import EpisodeRecord
from proctor.imageref import is_reference
from proctor.models import (
    EpisodeCreate,
    EpisodeCreated,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
)
from service.admission import admit
from service.deps import Resources
from service.errors import BadRequest, Conflict, NotFound, ServiceUnavailable
from service.images import check_reference
from service.repos import resolve_ref


def validate_request(resources: Resources, request: EpisodeCreate) -> None:
    """What pydantic cannot know: this deployment's images and limits."""
    settings = resources.settings
    task = request.task
    if task.image not in settings.images:
        if not is_reference(task.image):
            known = ", ".join(sorted(settings.images))
            raise BadRequest(f"unknown image {task.image!r}; this deployment offers: {known}")
        check_reference(settings, resources.store, task.image)
    admit(request, settings)  # limits and time within what a worker host can give


def seal_repository(request: EpisodeCreate) -> EpisodeCreate:
    """The request with its repository sealed (only the base commit's past, rebuilt): what
    the sandbox unpacks. An upload that cannot be sealed is refused (422) with the reason.
    One named by `ref` was sealed at its upload (`service.repos`); one baked into the image
    (`path`) is sealed by the worker (`workers.repos`)."""
    repo = request.task.repo
    if repo is None or (repo.archive is None and repo.bundle is None):
        return request
    try:
        sealed = seal(repo)
    except SealRefused as exc:
        raise BadRequest(f"task.repo cannot be sealed: {exc}") from None
    except SealUnavailable as exc:
        raise ServiceUnavailable(f"repositories cannot be sealed here: {exc}") from None
    task = request.task.model_copy(update={"repo": sealed})
    return request.model_copy(update={"task": task})


def is_terminal(status: EpisodeStatus) -> bool:
    return status.terminal


def is_ready(status: EpisodeStatus) -> bool:
    """An interactive episode can take actions (or will never be able to)."""
    return status is EpisodeStatus.running or status.terminal


async def wait_for_status(
    resources: Resources,
    episode_id: str,
    timeout_s: float,
    until: Callable[[EpisodeStatus], bool] = is_terminal,
) -> tuple[EpisodeStatus | None, Any]:
    """The status once `until` holds, or as it stands when the time is up (None: no record),
    with the result's JSON once it ended. Never polls: it reads once, then at each event."""
    events = resources.events
    await events.ready(timeout_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        woken = events.register(episode_id)
        try:
            status, result = await events.outcome(episode_id)
            remaining = deadline - loop.time()
            if status is None or until(status) or remaining <= 0:
                return status, result
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(woken), remaining)
        finally:
            events.unregister(episode_id, woken)


async def wait_for_end(
    resources: Resources,
    episode_id: str,
    timeout_s: float,
    until: Callable[[EpisodeStatus], bool] = is_terminal,
) -> EpisodeRecord | None:
    """The record once `until` holds of its status, or as it stands when the time is up;
    read whole once, at the end."""
    await wait_for_status(resources, episode_id, timeout_s, until)
    return await to_thread.run_sync(resources.store.get, episode_id)


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Many episodes at once: the results of those that ended (their stored JSON, in the
    order asked), and the ids of those still running and of those with no record."""

    ended: list[bytes]
    pending: list[str]
    unknown: list[str]


async def wait_for_many(
    resources: Resources, episode_ids: Sequence[str], timeout_s: float
) -> Outcomes:
    """Until every episode ended (or has no record), or the time is up. As `wait_for_status`
    for each, never polling; an event re-reads only its episode, in one round trip with the
    others woken at the same moment."""
    events = resources.events
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    if timeout_s > 0:
        await events.ready(timeout_s)
    asked = list(dict.fromkeys(episode_ids))
    ended: dict[str, bytes] = {}
    unknown: set[str] = set()
    woken: asyncio.Queue[str] = asyncio.Queue()
    watching: dict[str, asyncio.Future[None]] = {}

    def watch(episode_id: str) -> None:
        future = events.register(episode_id)
        future.add_done_callback(lambda _: woken.put_nowait(episode_id))
        watching[episode_id] = future

    def unwatch(episode_id: str) -> None:
        events.unregister(episode_id, watching.pop(episode_id))

    to_read = asked
    try:
        while True:
            for episode_id in to_read:
                watch(episode_id)  # before the read, so no event is missed in between
            outcomes = await events.outcomes(to_read)
            for episode_id, (status, result) in zip(to_read, outcomes, strict=True):
                if status is not None and status.terminal and not result:
                    result = await _public_json(resources, episode_id)  # None: it expired
                    status = status if result else None
                if status is None:
                    unknown.add(episode_id)
                elif status.terminal:
                    ended[episode_id] = result
                else:
                    continue
                unwatch(episode_id)
            remaining = deadline - loop.time()
            if not watching or remaining <= 0:
                break
            try:
                first = await asyncio.wait_for(woken.get(), remaining)
            except TimeoutError:
                break
            to_read = list(dict.fromkeys([first, *_drain(woken)]))
            for episode_id in to_read:
                if episode_id in watching:
                    unwatch(episode_id)
            to_read = [i for i in to_read if i not in ended and i not in unknown]
    finally:
        for episode_id in list(watching):
            unwatch(episode_id)
    return Outcomes(
        ended=[ended[i] for i in asked if i in ended],
        pending=[i for i in asked if i not in ended and i not in unknown],
        unknown=[i for i in asked if i in unknown],
    )


def _drain(queue: asyncio.Queue[str]) -> list[str]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


async def _public_json(resources: Resources, episode_id: str) -> bytes | None:
    """An ended episode without a stored result, as GET shows it (None: no record now)."""
    public = await to_thread.run_sync(resources.store.public, episode_id)
    return public.model_dump_json().encode() if public is not None else None


async def wait_for_public(
    resources: Resources, episode_id: str, timeout_s: float
) -> EpisodeResult | None:
    """`wait_for_end(...).public()`, from the result alone once the episode ended (decoded
    here when it is small, in a thread when it is large)."""
    _, result = await wait_for_status(resources, episode_id, timeout_s)
    if result is None:
        return await to_thread.run_sync(resources.store.public, episode_id)
    if len(result) <= INLINE_DECODE_BYTES:
        return EpisodeResult.model_validate_json(result)
    return await to_thread.run_sync(EpisodeResult.model_validate_json, result)


async def submit(resources: Resources, requests: Sequence[EpisodeCreate]) -> list[str]:
    """Validate, check that a worker can run them, store and enqueue (all or none); ids."""
    try:
        for request in requests:
            validate_request(resources, request)
        resources.queue.check_open()
        if any(r.task.repo is not None for r in requests):  # else sealing changes nothing
            resources.queue.leave()  # sealing takes a while: not in an intake lane
            requests = [await to_thread.run_sync(seal_repository, r) for r in requests]
            requests = [await to_thread.run_sync(resolve_ref, resources, r) for r in requests]
        return await to_thread.run_sync(_store_and_enqueue, resources, requests)
    finally:
        resources.queue.leave()  # its intake lane and probe go to the next request


def _store_and_enqueue(resources: Resources, requests: Sequence[EpisodeCreate]) -> list[str]:
    """The blocking part of a submit, in one thread hop."""
    resources.queue.check_open()  # shut while the request waited for its thread
    resources.images.check(requests)
    return resources.queue.submit(requests)


async def create(
    resources: Resources, request: EpisodeCreate, *, wait_s: float = 0
) -> EpisodeResult | EpisodeCreated:
    """Submit one episode, and answer with what there is to say about it by now.

    One-shot: its result if it ends within `wait_s`, else that it is queued. Interactive:
    once its sandbox is ready, the first observation (or its result, if it already ended).
    """
    [episode_id] = await submit(resources, [request])
    if request.mode is EpisodeMode.interactive:
        return await started(resources, episode_id)
    if wait_s > 0:
        public = await wait_for_public(
            resources, episode_id, min(wait_s, resources.settings.max_wait_s)
        )
        if public is not None and public.status.terminal:
            return public
    return EpisodeCreated(id=episode_id, status=EpisodeStatus.queued)


async def started(resources: Resources, episode_id: str) -> EpisodeResult | EpisodeCreated:
    """An interactive episode once its sandbox is ready: created with its first observation;
    its result if it ended; created without one if it is still starting."""
    wait_s = min(INTERACTIVE_START_S, resources.settings.max_wait_s)
    record = await wait_for_end(resources, episode_id, wait_s, until=is_ready)
    if record is None:
        raise NotFound(f"episode {episode_id} vanished while starting")
    if record.status.terminal:
        return record.public()
    if record.status is not EpisodeStatus.running:
        return EpisodeCreated(id=episode_id, status=record.status)
    observation = record.started_sandbox().observation
    return EpisodeCreated(id=episode_id, status=record.status, observation=observation)


async def create_batch(resources: Resources, requests: Sequence[EpisodeCreate]) -> list[str]:
    """Submit a batch (up to the deployment's `max_batch`); the ids in order."""
    if len(requests) > resources.settings.max_batch:
        raise BadRequest(f"at most {resources.settings.max_batch} episodes per batch")
    return await submit(resources, requests)


async def get(resources: Resources, episode_id: str, *, wait_s: float = 0) -> EpisodeResult:
    """The episode as it stands, or once it ends if that is within `wait_s`."""
    if wait_s > 0:
        public = await wait_for_public(
            resources, episode_id, min(wait_s, resources.settings.max_wait_s)
        )
    else:
        public = await to_thread.run_sync(resources.store.public, episode_id)
    if public is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    return public


async def get_many(
    resources: Resources, episode_ids: Sequence[str], *, wait_s: float = 0
) -> Outcomes:
    """Many episodes as they stand, or once all ended if that is within `wait_s`."""
    if len(episode_ids) > resources.settings.max_batch:
        raise BadRequest(f"at most {resources.settings.max_batch} episodes per request")
    return await wait_for_many(resources, episode_ids, min(wait_s, resources.settings.max_wait_s))


def cancel(resources: Resources, episode_id: str) -> EpisodeResult:
    """End an episode as cancelled; 409 if it has already ended."""
    store = resources.store
    record = store.get(episode_id)
    if record is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    if record.status.terminal:
        raise Conflict(f"episode {episode_id} already ended as {record.status.value}")
    result = results.cancelled(record)
    if not store.finish(result):
        raise Conflict(f"episode {episode_id} ended before it could be cancelled")
    return result  # the worker holding its sandbox sees it ended and removes it


def end_at_deadline(resources: Resources, episode_id: str) -> EpisodeResult:
    """End an episode the trainer can no longer wait for, and tell its worker to stop."""
    store = resources.store
    record = store.get(episode_id)
    if record is None:
        return results.record_gone(episode_id)
    if record.status.terminal:
        return record.public()
    ran = record.status in (EpisodeStatus.running, EpisodeStatus.evaluating)
    ended = (
        results.timed_out(record, "the trainer's deadline passed while it ran")
        if ran
        else results.infra_failure(record, "no sandbox was free before the trainer's deadline")
    )
    if store.finish(ended):
        return ended  # the worker holding its sandbox sees it ended and removes it
    latest = store.get(episode_id)  # it ended on its own meanwhile
    return latest.public() if latest is not None else ended
