"""Resources the lifespan owns, and the `Annotated` aliases routes declare to get them
(the resources, and bearer auth: in the header, or also in the URL for the adapters)."""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import redis
import redis.asyncio as aioredis
from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from core.config import Settings
from core.store import EpisodeStore, ReplyWaiter
from service.errors import Unauthorized
from service.events import EpisodeEvents
from service.images import ImageCheck
from service.queueing import EpisodeQueue


@dataclass(slots=True)
class Resources:
    settings: Settings
    redis: redis.Redis
    aredis: aioredis.Redis
    store: EpisodeStore
    queue: EpisodeQueue
    events: EpisodeEvents
    replies: ReplyWaiter
    images: ImageCheck


# The dependencies are coroutines: FastAPI runs a plain function in its thread pool, a
# hand-off that costs more than what these do (every request pays it)
async def get_resources(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]

_bearer = HTTPBearer(auto_error=False)


async def require_token(
    resources: ResourcesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    check_token(resources, credentials)


def check_token(resources: Resources, credentials: HTTPAuthorizationCredentials | None) -> None:
    """Bearer auth when tokens are configured; an open local default when none are."""
    tokens = resources.settings.api_tokens
    if not tokens:
        return
    if credentials is None:
        raise Unauthorized("a bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    if not token_valid(tokens, credentials.credentials):
        raise Unauthorized("the bearer token is not valid", headers={"WWW-Authenticate": "Bearer"})


def token_valid(tokens: Sequence[str], offered: str) -> bool:
    """`offered` is one of `tokens` (compared in constant time)."""
    encoded = offered.encode()
    return any(hmac.compare_digest(encoded, token.encode()) for token in tokens)


Authenticated = Depends(require_token)


async def adapter_auth(
    resources: ResourcesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    token: Annotated[
        str | None,
        Query(description="the bearer token, for trainer clients that cannot send headers"),
    ] = None,
) -> None:
    """The adapters' auth: a token accepted in the URL too (trainers' clients send no headers)."""
    if credentials is None and token:
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)
    check_token(resources, credentials)


AdapterAuthenticated = Depends(adapter_auth)
