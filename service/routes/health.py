"""Liveness and readiness: is the process up, and can it do work?"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError

from service.deps import ResourcesDep

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", operation_id="readyz")
def readyz(resources: ResourcesDep) -> JSONResponse:
    """Ready when Redis answers and at least one worker has sent a heartbeat lately."""
    checks: dict[str, Any] = {}
    try:
        resources.redis.ping()
        checks["redis"] = "ok"
        workers = resources.store.live_workers(resources.settings.heartbeat_ttl_s)
        checks["workers"] = len(workers)
        problems = resources.store.worker_problems(workers)
        if problems:
            checks["worker_problems"] = problems
    except RedisError as exc:
        checks["redis"] = f"unreachable: {exc}"
        checks["workers"] = 0
    healthy = checks["workers"] - len(checks.get("worker_problems", {}))
    ready = checks["redis"] == "ok" and healthy > 0
    if checks["redis"] == "ok" and not ready:
        checks["reason"] = (
            "no worker can run episodes: " + "; ".join(checks["worker_problems"].values())
            if checks.get("worker_problems")
            else "no live worker: start one with `proctor worker`"
        )
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )
