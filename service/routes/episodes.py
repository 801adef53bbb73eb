"""Episodes: create (one or a batch), read, wait for, cancel."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from core.store import EpisodeRecord
from proctor.models import (
    EpisodeCreate,
    EpisodeCreated,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    Verdict,
)
from service.admission import admit
from service.deps import Authenticated, Resources, ResourcesDep
from service.errors import BadRequest, Conflict, NotFound, ServiceUnavailable, error_responses

router = APIRouter(prefix="/v1/episodes", tags=["episodes"], dependencies=[Authenticated])

INTERACTIVE_START_S = 180.0
IMAGE_RETRY_AFTER_S = 10


class EpisodeBatchCreate(BaseModel):
    episodes: list[EpisodeCreate] = Field(min_length=1)


class EpisodeBatchCreated(BaseModel):
    ids: list[str]


WaitSeconds = Annotated[
    float, Query(ge=0, le=300, description="hold the request until done, at most this long "
                 "(and at most the deployment's PROCTOR_MAX_WAIT_S: a longer wait is cut to it)")
]


def validate_request(resources: Resources, request: EpisodeCreate) -> None:
    """What pydantic cannot know: this deployment's images and limits."""
    settings = resources.settings
    task = request.task
    if task.image not in settings.images:
        known = ", ".join(sorted(settings.images))
        raise BadRequest(f"unknown image {task.image!r}; this deployment offers: {known}")
    admit(request, settings)  # limits and time within what a worker host can give


def check_images_runnable(resources: Resources, requests: Sequence[EpisodeCreate]) -> None:
    """Refuse (503) a task whose image no live worker can run: it would stay queued forever.

    The image is in this deployment's allowlist, so this is our failure, not the caller's:
    a 503 with Retry-After that names the image and why each worker cannot run it.
    """
    settings = resources.settings
    unrunnable = resources.store.unrunnable_images(
        sorted({r.task.image for r in requests}), ttl_s=settings.heartbeat_ttl_s)
    if unrunnable:
        name, why = min(unrunnable.items())
        raise ServiceUnavailable(
            f"no live worker can run image {name!r} ({settings.images.get(name, name)}): "
            f"{why[:1000]}", headers={"Retry-After": str(IMAGE_RETRY_AFTER_S)})


def is_terminal(record: EpisodeRecord) -> bool:
    return record.status.terminal


def is_ready(record: EpisodeRecord) -> bool:
    """An interactive episode can take actions (or will never be able to)."""
    return record.status is EpisodeStatus.running or record.status.terminal


async def wait_for_end(
    resources: Resources,
    episode_id: str,
    timeout_s: float,
    until: Callable[[EpisodeRecord], bool] = is_terminal,
) -> EpisodeRecord | None:
    """The record once `until` holds, or as it stands when the time is up. Never polls."""
    events = resources.events
    await events.ready(timeout_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        woken = events.register(episode_id)
        try:
            record = await to_thread.run_sync(resources.store.get, episode_id)
            remaining = deadline - loop.time()
            if record is None or until(record) or remaining <= 0:
                return record
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(woken), remaining)
        finally:
            events.unregister(episode_id, woken)


@router.post(
    "",
    operation_id="create_episode",
    status_code=status.HTTP_202_ACCEPTED,
    responses={200: {"model": EpisodeResult, "description": "the episode ended within `wait`"},
               201: {"model": EpisodeCreated,
                     "description": "an interactive episode is running: its first observation"},
               202: {"model": EpisodeCreated, "description": "queued (or still starting)"},
               **error_responses(400, 401, 404, 413, 422, 429, 503)},
)
async def create_episode(
    request: EpisodeCreate, resources: ResourcesDep, wait: WaitSeconds = 0
) -> JSONResponse:
    validate_request(resources, request)
    await to_thread.run_sync(check_images_runnable, resources, [request])
    [episode_id] = await to_thread.run_sync(resources.queue.submit, [request])
    if request.mode is EpisodeMode.interactive:
        return await ready_interactive(resources, episode_id)
    if wait > 0:
        record = await wait_for_end(resources, episode_id, min(wait, resources.settings.max_wait_s))
        if record is not None and record.status.terminal:
            return JSONResponse(record.public().model_dump(mode="json"), status_code=200)
    created = EpisodeCreated(id=episode_id, status=EpisodeStatus.queued)
    return JSONResponse(created.model_dump(mode="json"), status_code=202)


async def ready_interactive(resources: Resources, episode_id: str) -> JSONResponse:
    """Answer an interactive create once its sandbox is ready, with the first observation."""
    wait_s = min(INTERACTIVE_START_S, resources.settings.max_wait_s)
    record = await wait_for_end(resources, episode_id, wait_s, until=is_ready)
    if record is None:
        raise NotFound(f"episode {episode_id} vanished while starting")
    if record.status.terminal:
        return JSONResponse(record.public().model_dump(mode="json"), status_code=200)
    if record.status is not EpisodeStatus.running:
        created = EpisodeCreated(id=episode_id, status=record.status)
        return JSONResponse(created.model_dump(mode="json"), status_code=202)
    observation = Observation.model_validate_json(record.fields["observation"])
    created = EpisodeCreated(id=episode_id, status=record.status, observation=observation)
    return JSONResponse(created.model_dump(mode="json"), status_code=201)


@router.post(
    "/batch",
    operation_id="create_episodes",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=EpisodeBatchCreated,
    responses=error_responses(400, 401, 413, 422, 429, 503),
)
async def create_episodes(
    batch: EpisodeBatchCreate, resources: ResourcesDep
) -> EpisodeBatchCreated:
    if len(batch.episodes) > resources.settings.max_batch:
        raise BadRequest(f"at most {resources.settings.max_batch} episodes per batch")
    for request in batch.episodes:
        validate_request(resources, request)
    await to_thread.run_sync(check_images_runnable, resources, batch.episodes)
    ids = await to_thread.run_sync(resources.queue.submit, batch.episodes)
    return EpisodeBatchCreated(ids=ids)


@router.get("/{episode_id}", operation_id="get_episode", response_model=EpisodeResult,
            responses=error_responses(401, 404, 422, 503))
async def get_episode(
    episode_id: str, resources: ResourcesDep, wait: WaitSeconds = 0
) -> EpisodeResult:
    if wait > 0:
        record = await wait_for_end(resources, episode_id, min(wait, resources.settings.max_wait_s))
    else:
        record = await to_thread.run_sync(resources.store.get, episode_id)
    if record is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    return record.public()


@router.delete("/{episode_id}", operation_id="cancel_episode", response_model=EpisodeResult,
               responses=error_responses(401, 404, 409, 422, 503))
def cancel_episode(episode_id: str, resources: ResourcesDep) -> EpisodeResult:
    store = resources.store
    record = store.get(episode_id)
    if record is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    if record.status.terminal:
        raise Conflict(f"episode {episode_id} already ended as {record.status.value}")
    cancelled = record.public().model_copy(
        update={"status": EpisodeStatus.cancelled, "verdict": Verdict.cancelled, "reward": None}
    )
    if not store.finish(cancelled):
        raise Conflict(f"episode {episode_id} ended before it could be cancelled")
    return cancelled  # the worker holding its sandbox sees it ended and removes it

