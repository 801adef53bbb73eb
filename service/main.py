"""Assembles the FastAPI app: settings, resources in the lifespan, routers, error handlers."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
import redis.asyncio as aioredis
from fastapi import FastAPI
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from core.config import Settings, get_settings
from core.defaults import API_REDIS_CONNECTIONS, REDIS_HEALTH_CHECK_S, REDIS_READ_RETRIES
from core.sink import EpisodeSink
from core.store import EpisodeStore, ReplyWaiter
from service.body_limit import BodySizeLimit
from service.deps import Resources
from service.door import QueueDoor
from service.errors import install_error_handlers
from service.events import EpisodeEvents
from service.images import ImageCheck
from service.interactive import longest_reply_wait_s
from service.queueing import EpisodeQueue
from service.routes import (
    episodes,
    export,
    health,
    images,
    interactive,
    listing,
    metrics,
    openrlhf,
    regrade,
    repos,
    sandboxfusion,
    screen,
    ui,
)

API_VERSION = "0.1.0"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sync_redis = redis.Redis.from_url(
            settings.redis_url, health_check_interval=REDIS_HEALTH_CHECK_S
        )
        # the async client reads (waits, events) and takes an action's lock: a command on a
        # connection Redis closed (a restart) is retried on a fresh one, not answered 503
        async_redis = aioredis.Redis.from_url(
            settings.redis_url,
            health_check_interval=REDIS_HEALTH_CHECK_S,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), REDIS_READ_RETRIES),
            max_connections=API_REDIS_CONNECTIONS,  # a batch's requests take locks at once
        )
        # the episodes the API ends (cancels, deadlines) go to the durable sink too
        sink = EpisodeSink.of(settings, f"api-{socket.gethostname()}-{os.getpid()}")
        store = EpisodeStore(sync_redis, result_ttl_s=settings.result_ttl_s, sink=sink)
        events = EpisodeEvents(async_redis)
        replies = ReplyWaiter(settings.redis_url, longest_wait_s=longest_reply_wait_s(settings))
        app.state.resources = Resources(
            settings=settings,
            redis=sync_redis,
            aredis=async_redis,
            store=store,
            queue=EpisodeQueue(
                sync_redis,
                store,
                max_depth=settings.max_queue_depth,
                max_wait_s=settings.max_queue_wait_s,
                worker_ttl_s=settings.heartbeat_ttl_s,
                dedup_ttl_s=settings.dedup_ttl_s,
            ),
            events=events,
            replies=replies,
            images=ImageCheck(settings, store),
        )
        await events.start()
        try:
            yield
        finally:
            await events.stop()
            await replies.close()
            await async_redis.aclose()
            sync_redis.close()

    app = FastAPI(
        title="Proctor",
        version=API_VERSION,
        summary="Sandboxed code-execution rewards for RL, hard to cheat.",
        lifespan=lifespan,
    )
    # the last added is the outermost: the size limit counts what the door reads
    app.add_middleware(QueueDoor, paths=episodes.CREATE_PATHS)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        larger={repos.PATH: settings.repo_max_mb << 20},  # its own bound, checked as it streams
    )
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(export.router)  # before episodes: `/export` is not an episode id
    app.include_router(episodes.router)
    app.include_router(listing.router)
    app.include_router(regrade.router)
    app.include_router(repos.router)
    app.include_router(interactive.router)
    app.include_router(screen.router)
    app.include_router(images.router)
    app.include_router(sandboxfusion.router)
    app.include_router(openrlhf.router)
    app.include_router(ui.router)
    return app
