"""SandboxFusion's routes: `POST /run_code`, `POST /run_jupyter` and `GET /v1/ping`
(`service.adapters.sandboxfusion`, `service.adapters.jupyter`).

verl, ROLL and SkyRL point at these; the token may come in the URL (`?token=`).
"""

from __future__ import annotations

from fastapi import APIRouter

from service.adapters import jupyter, sandboxfusion
from service.adapters.jupyter import RunJupyterRequest, RunJupyterResponse
from service.adapters.sandboxfusion import RunCodeRequest, RunCodeResponse
from service.deps import AdapterAuthenticated, ResourcesDep
from service.errors import error_responses
from service.idempotency import IdempotencyHeader, ShareIdentical

router = APIRouter(tags=["sandboxfusion"])


@router.post(
    "/run_code",
    operation_id="sandboxfusion_run_code",
    response_model=RunCodeResponse,
    dependencies=[AdapterAuthenticated],
    responses=error_responses(400, 401, 413, 422, 503, 504),
)
async def run_code(
    request: RunCodeRequest,
    resources: ResourcesDep,
    idempotency_key: IdempotencyHeader = None,
    share_identical: ShareIdentical = False,
) -> RunCodeResponse:
    """Every call is a run of its own (SandboxFusion's behaviour: two equal programs, two
    runs), unless it carries an `Idempotency-Key` a retry repeats, or the URL asks for
    content dedup (`?share_identical=true`). Past the queue's wait bound the call is held,
    not refused; only a queue longer than its client waits answers 504 (`service.overload`)."""
    return await sandboxfusion.run_code(
        resources, request, idempotency_key=idempotency_key, share_identical=share_identical
    )


@router.post(
    "/run_jupyter",
    operation_id="sandboxfusion_run_jupyter",
    response_model=RunJupyterResponse,
    dependencies=[AdapterAuthenticated],
    responses=error_responses(400, 401, 413, 422, 503),
)
async def run_jupyter(request: RunJupyterRequest, resources: ResourcesDep) -> RunJupyterResponse:
    return await jupyter.run_jupyter(resources, request)


@router.get("/v1/ping", operation_id="sandboxfusion_ping")
def ping() -> str:
    return "pong"
