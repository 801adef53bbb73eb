"""Interactive episodes over HTTP: one action at a time, then finish (`service.interactive`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from proctor.models import EpisodeResult, InteractiveAction, StepResult
from service import interactive
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/episodes", tags=["interactive"], dependencies=[Authenticated])

ActionBody = Annotated[InteractiveAction, Body()]


# the worker's own refusals (404, 409, 503) and failures (500) are relayed as they are
@router.post(
    "/{episode_id}/actions",
    operation_id="act",
    response_model=StepResult,
    responses=error_responses(400, 401, 404, 409, 413, 422, 500, 503),
)
async def act(episode_id: str, action: ActionBody, resources: ResourcesDep) -> StepResult:
    return await interactive.act(resources, episode_id, action)


@router.post(
    "/{episode_id}/finish",
    operation_id="finish_episode",
    response_model=EpisodeResult,
    responses=error_responses(401, 404, 409, 422, 500, 503),
)
async def finish(episode_id: str, resources: ResourcesDep) -> EpisodeResult:
    return await interactive.finish(resources, episode_id)
