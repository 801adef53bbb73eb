"""OpenRLHF's remote reward: `POST /openrlhf/reward` (and `/get_reward`, its server's path).

    --remote_rm_url http://proctor:8000/openrlhf/reward

Always 200, the answer within `deadline_s` (OpenRLHF's client gives up after 180 s); the
translation is `service.adapters.openrlhf`. A retry of a call (the same body, or the same
`Idempotency-Key`) gets the same episodes; equal queries within a call run apart.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from service.adapters import openrlhf
from service.adapters.openrlhf import RewardRequest, RewardResponse
from service.deps import AdapterAuthenticated, ResourcesDep
from service.errors import error_responses
from service.idempotency import IdempotencyHeader, ShareIdentical

router = APIRouter(tags=["openrlhf"], dependencies=[AdapterAuthenticated])

ADAPTER_ERRORS = error_responses(400, 401, 413, 422, 503)

DeadlineSeconds = Annotated[
    float,
    Query(
        gt=0,
        le=3600,
        description="answer within this long (OpenRLHF waits 180 s); "
        "at most the deployment's PROCTOR_MAX_WAIT_S",
    ),
]


@router.post(
    "/openrlhf/reward",
    operation_id="openrlhf_reward",
    response_model=RewardResponse,
    responses=ADAPTER_ERRORS,
)
async def reward(
    request: RewardRequest,
    resources: ResourcesDep,
    deadline_s: DeadlineSeconds = 170.0,
    idempotency_key: IdempotencyHeader = None,
    share_identical: ShareIdentical = False,
) -> Any:
    return await openrlhf.reward(
        resources,
        request,
        deadline_s,
        idempotency_key=idempotency_key,
        share_identical=share_identical,
    )


@router.post(
    "/get_reward",
    operation_id="openrlhf_get_reward",
    response_model=RewardResponse,
    responses=ADAPTER_ERRORS,
)
async def get_reward(
    request: RewardRequest,
    resources: ResourcesDep,
    deadline_s: DeadlineSeconds = 170.0,
    idempotency_key: IdempotencyHeader = None,
    share_identical: ShareIdentical = False,
) -> Any:
    """The path OpenRLHF's own reward server serves, for configs written against it."""
    return await openrlhf.reward(
        resources,
        request,
        deadline_s,
        idempotency_key=idempotency_key,
        share_identical=share_identical,
    )
