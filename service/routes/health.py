"""Liveness and readiness: is the process up, and can it do work (`service.readiness`)?"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.deps import ResourcesDep
from service.readiness import Readiness, readiness

router = APIRouter(tags=["health"])

READY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Readiness, "description": "ready to run episodes"},
    503: {"model": Readiness, "description": "not ready: `checks.reason` says why"},
}


@router.get("/healthz", operation_id="healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", operation_id="readyz", responses=READY_RESPONSES)
def readyz(resources: ResourcesDep) -> JSONResponse:
    """Ready when Redis answers, a worker has sent a heartbeat lately, and every image of
    the allowlist can be run by some live worker (an image can vanish after start)."""
    answer = readiness(resources)
    return JSONResponse(
        answer.model_dump(mode="json"), status_code=200 if answer.status == "ready" else 503
    )
