"""The queue's door: while this API process knows the queue is full, a request to queue
episodes is answered 429 here, in front of the application.

In a flood, refusals are most of the requests, and each client sends again the moment it
is refused. Every request in line ahead of an accepted one delays it, so a refusal must cost
next to nothing: routed, authenticated and answered by FastAPI, a refusal in a flood cost
the API ~0.31 ms of CPU; answered here, ~0.13 ms, most of it uvicorn's own (~1.2 ms when
Redis is asked; `bench/api_cost.py`). The body is not read. Whether the door is shut is
for `EpisodeQueue.check_open` to say; the submit path checks it again for whatever this
middleware let through (and for the adapters' routes, which answer overload in their own
formats).

With the door open, a request reads its body and then waits for an intake lane
(`EpisodeQueue.enter`): a burst is then sent on a few at a time, and what waits is refused
here the moment Redis's first refusal shuts the door.

With bearer tokens configured, a request without a valid one goes on to the application,
which answers 401 as it would at any other time: the door answers only the clients it
would have answered anyway.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.deps import Resources, token_valid
from service.errors import Overloaded, error_response
from service.queueing import EpisodeQueue


class QueueDoor:
    def __init__(self, app: ASGIApp, *, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            resources: Resources | None = getattr(scope["app"].state, "resources", None)
            if resources is not None and _authorized(resources, scope):
                await self._through(resources.queue, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _through(
        self, queue: EpisodeQueue, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Refused at once while the door is shut; else the body is read (a slow upload
        holds no intake lane) and the request waits for its lane (`EpisodeQueue.enter`),
        which it holds until its answer from Redis, or its response if that comes first."""
        try:
            try:
                queue.check_open()
                body = await _read_body(receive)
                await queue.enter()
            except Overloaded as shut:
                await error_response(shut)(scope, receive, send)
                return

            async def replay() -> Message:
                return body.pop(0) if body else await receive()

            async def answer(message: Message) -> None:
                if message["type"] == "http.response.start":
                    queue.leave()  # answered before its episode was queued: a 422
                await send(message)

            await self.app(scope, replay, answer)
        finally:
            queue.leave()  # also a probe whose body was too large, or never came


async def _read_body(receive: Receive) -> list[Message]:
    """The request's messages up to the end of its body (`BodySizeLimit`, outside, counts)."""
    messages = [await receive()]
    while messages[-1]["type"] == "http.request" and messages[-1].get("more_body", False):
        messages.append(await receive())
    return messages


def _authorized(resources: Resources, scope: Scope) -> bool:
    """The request would pass the application's bearer auth."""
    tokens = resources.settings.api_tokens
    if not tokens:
        return True
    header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
    scheme, _, offered = header.partition(" ")
    return scheme.lower() == "bearer" and token_valid(tokens, offered.strip())
