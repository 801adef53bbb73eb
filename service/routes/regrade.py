"""Regrading over HTTP: `POST /v1/episodes/{id}/regrade` (`service.regrade`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from proctor.models import EpisodeRegrade, TestSpec
from service import regrade
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/episodes", tags=["episodes"], dependencies=[Authenticated])


@router.post(
    "/{episode_id}/regrade",
    operation_id="regrade_episode",
    response_model=EpisodeRegrade,
    responses=error_responses(400, 401, 404, 409, 413, 422, 429, 503),
)
async def regrade_episode(
    episode_id: str,
    resources: ResourcesDep,
    tests: Annotated[
        TestSpec | None,
        Body(embed=True, description="grade with these tests instead of the task's own"),
    ] = None,
    wait: Annotated[
        float, Query(ge=0, le=300, description="hold the request until the new one is done")
    ] = 0,
) -> EpisodeRegrade:
    return await regrade.regrade(resources, episode_id, tests=tests, wait_s=wait)
