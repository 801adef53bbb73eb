"""Prefetching task images: one job per live worker host, on the host's own queue, pulls
every image a dataset names there (`workers/prefetch.py`); the client polls the progress.

Each reference is judged as a submission would be (the deployment's patterns), so a
prefetch never warms what no episode may use.
"""

from __future__ import annotations

import uuid

from anyio import to_thread

from core import keys, prefetch
from core.queues import PREFETCH_IMAGES
from proctor.prefetch import PrefetchCreate, PrefetchPublic
from service.deps import Resources
from service.errors import NotFound, ServiceUnavailable
from service.images import check_allowed

JOB_SLACK_S = 60.0


def live_hosts(resources: Resources) -> list[str]:
    workers = resources.store.live_workers(resources.settings.heartbeat_ttl_s)
    if not workers:
        return []
    hosts = resources.redis.hmget(keys.WORKER_HOSTS, workers)
    return sorted({h.decode() if isinstance(h, bytes) else str(h) for h in hosts if h})


def start(resources: Resources, request: PrefetchCreate) -> PrefetchPublic:
    for image in request.images:
        check_allowed(resources.settings, image)
    hosts = live_hosts(resources)
    if not hosts:
        raise ServiceUnavailable("no live worker host to prefetch on", headers={"Retry-After": "5"})
    prefetch_id = uuid.uuid4().hex
    prefetch.create(resources.redis, prefetch_id, request.images, hosts)
    timeout_s = len(request.images) * resources.settings.pull_timeout_s + JOB_SLACK_S
    for host in hosts:
        resources.queue.to_host(host, PREFETCH_IMAGES, [prefetch_id], timeout_s=timeout_s)
    status = prefetch.read(resources.redis, prefetch_id)
    assert status is not None  # just written
    return status


def progress(resources: Resources, prefetch_id: str) -> PrefetchPublic:
    status = prefetch.read(resources.redis, prefetch_id)
    if status is None:
        raise NotFound(f"no prefetch {prefetch_id!r} (unknown, or it expired)")
    return status


async def start_async(resources: Resources, request: PrefetchCreate) -> PrefetchPublic:
    return await to_thread.run_sync(start, resources, request)


async def progress_async(resources: Resources, prefetch_id: str) -> PrefetchPublic:
    return await to_thread.run_sync(progress, resources, prefetch_id)
