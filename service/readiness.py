"""Readiness: can this deployment run episodes now (Redis, live workers, their images)?"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from anticheat.judge import calibration
from service.deps import Resources


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, Any] = Field(
        description="redis, workers, worker_problems, images (name → ok or why not), judge "
        "(configured, reachable, useful and why: the last calibration), reason"
    )


def readiness(resources: Resources) -> Readiness:
    """Ready when Redis answers, a worker has sent a heartbeat lately, and every image of
    the allowlist can be run by some live worker (an image can vanish after start)."""
    settings = resources.settings
    checks: dict[str, Any] = {}
    reasons: list[str] = []
    unrunnable: dict[str, str] = {}
    try:
        resources.redis.ping()
        checks["redis"] = "ok"
        workers = resources.store.live_workers(settings.heartbeat_ttl_s)
        checks["workers"] = len(workers)
        problems = resources.store.worker_problems(workers)
        if problems:
            checks["worker_problems"] = problems
        unrunnable = (
            resources.store.unrunnable_images(settings.images, ttl_s=settings.heartbeat_ttl_s) or {}
        )
        checks["images"] = {name: unrunnable.get(name, "ok") for name in settings.images}
        checks["judge"] = judge_state(resources).model_dump(mode="json")
    except RedisError as exc:
        checks["redis"] = f"unreachable: {exc}"
        checks["workers"] = 0
    if checks["redis"] == "ok":
        if checks["workers"] - len(checks.get("worker_problems", {})) <= 0:
            reasons.append(
                "no worker can run episodes: " + "; ".join(checks["worker_problems"].values())
                if checks.get("worker_problems")
                else "no live worker: start one with `proctor worker`"
            )
        else:  # some worker is healthy, yet an image may be gone from all of them
            reasons += [
                f"no live worker can run image {name!r}: {why}"
                for name, why in sorted(unrunnable.items())
            ]
    ready = checks["redis"] == "ok" and not reasons
    if reasons:
        checks["reason"] = "; ".join(reasons)
    return Readiness(status="ready" if ready else "not ready", checks=checks)


def judge_state(resources: Resources) -> calibration.JudgeState:
    """What the workers' last calibration of the judge found (never asked from here: the
    probes run in a worker, every `judge_calibration_interval_s`). Not a condition of
    readiness: a judge that is down or not useful leaves reviews to the rules' fallbacks."""
    found = calibration.read(resources.redis)
    url = resources.settings.judge_url.strip().rstrip("/")
    if found is not None and (not url or found.url == calibration.public_url(url)):
        return found
    return calibration.not_yet(url) if url else calibration.not_configured()
