"""Episodes over HTTP: create and read (one or many), wait for, cancel (`service.episodes`)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from proctor.models import EpisodeCreate, EpisodeCreated, EpisodeResult, EpisodeResults
from service import episodes
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses
from service.idempotency import IdempotencyHeader, keyed, keyed_batch

router = APIRouter(prefix="/v1/episodes", tags=["episodes"], dependencies=[Authenticated])
# the routes that queue episodes: `service.door` refuses them in front while the queue is full
CREATE_PATHS = frozenset({router.prefix, f"{router.prefix}/batch"})


class EpisodeBatchCreate(BaseModel):
    episodes: list[EpisodeCreate] = Field(min_length=1)


class EpisodeBatchCreated(BaseModel):
    ids: list[str]


class EpisodeIds(BaseModel):
    ids: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(min_length=1)


WaitSeconds = Annotated[
    float,
    Query(
        ge=0,
        le=300,
        description="hold the request until done, at most this long "
        "(and at most the deployment's PROCTOR_MAX_WAIT_S: a longer wait is cut to it)",
    ),
]


def created_response(outcome: EpisodeResult | EpisodeCreated) -> JSONResponse:
    """200 with the result, 201 with an interactive episode's first observation, else 202."""
    if isinstance(outcome, EpisodeResult):
        code = status.HTTP_200_OK
    elif outcome.observation is not None:
        code = status.HTTP_201_CREATED
    else:
        code = status.HTTP_202_ACCEPTED
    return JSONResponse(outcome.model_dump(mode="json"), status_code=code)


@router.post(
    "",
    operation_id="create_episode",
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        200: {"model": EpisodeResult, "description": "the episode ended within `wait`"},
        201: {
            "model": EpisodeCreated,
            "description": "an interactive episode is running: its first observation",
        },
        202: {"model": EpisodeCreated, "description": "queued (or still starting)"},
        **error_responses(400, 401, 404, 413, 422, 429, 503),
    },
)
async def create_episode(
    request: EpisodeCreate,
    resources: ResourcesDep,
    wait: WaitSeconds = 0,
    idempotency_key: IdempotencyHeader = None,
) -> JSONResponse:
    request = keyed(request, idempotency_key)
    return created_response(await episodes.create(resources, request, wait_s=wait))


@router.post(
    "/batch",
    operation_id="create_episodes",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=EpisodeBatchCreated,
    responses=error_responses(400, 401, 413, 422, 429, 503),
)
async def create_episodes(
    batch: EpisodeBatchCreate, resources: ResourcesDep, idempotency_key: IdempotencyHeader = None
) -> EpisodeBatchCreated:
    requests = keyed_batch(batch.episodes, idempotency_key)
    return EpisodeBatchCreated(ids=await episodes.create_batch(resources, requests))


@router.post(
    "/results",
    operation_id="get_episodes",
    response_model=EpisodeResults,
    responses={
        200: {"description": "every episode ended (or is unknown), or `wait` ran out"},
        **error_responses(400, 401, 413, 422, 503),
    },
)
async def get_episodes(
    batch: EpisodeIds, resources: ResourcesDep, wait: WaitSeconds = 0
) -> Response:
    """Many episodes at once, for a trainer that submitted a batch: with `wait`, held until
    all of them ended — one request where one `GET` per episode would be hundreds."""
    outcomes = await episodes.get_many(resources, batch.ids, wait_s=wait)
    return Response(results_body(outcomes), media_type="application/json")


def results_body(outcomes: episodes.Outcomes) -> bytes:
    """`EpisodeResults` as JSON, the results spliced in as stored: each is an `EpisodeResult`
    written by our workers, so decoding and encoding it again would only cost time."""
    return b"".join(
        (
            b'{"results":[',
            b",".join(outcomes.ended),
            b'],"pending":',
            json.dumps(outcomes.pending).encode(),
            b',"unknown":',
            json.dumps(outcomes.unknown).encode(),
            b"}",
        )
    )


@router.get(
    "/{episode_id}",
    operation_id="get_episode",
    response_model=EpisodeResult,
    responses=error_responses(401, 404, 422, 503),
)
async def get_episode(
    episode_id: str, resources: ResourcesDep, wait: WaitSeconds = 0
) -> EpisodeResult:
    return await episodes.get(resources, episode_id, wait_s=wait)


@router.delete(
    "/{episode_id}",
    operation_id="cancel_episode",
    response_model=EpisodeResult,
    responses=error_responses(401, 404, 409, 422, 503),
)
def cancel_episode(episode_id: str, resources: ResourcesDep) -> EpisodeResult:
    return episodes.cancel(resources, episode_id)
