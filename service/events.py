"""Waiting for episodes to end without polling.

One Redis pub/sub subscription per API process fans terminal-state events out to any
number of waiting requests. A waiter registers first and reads the record second, so an
event published between the two is never missed. At each wake-up a waiter reads only the
episode's status and, once it ended, its result (`outcome`), over the async client, a
bounded number at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from core import keys
from core.defaults import EVENTS_RECONNECT_S, STATUS_READS_IN_FLIGHT
from core.store import read_outcome, read_outcomes
from proctor.models import EpisodeStatus

log = logging.getLogger(__name__)


class EpisodeEvents:
    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._reads = asyncio.Semaphore(STATUS_READS_IN_FLIGHT)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="proctor-events")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def ready(self, timeout_s: float) -> None:
        """Wait (briefly) for the subscription, so no event is published before we listen."""
        try:
            await asyncio.wait_for(self._subscribed.wait(), timeout_s)
        except TimeoutError:
            log.warning("event subscription not ready after %.1fs", timeout_s)

    async def outcome(self, episode_id: str) -> tuple[EpisodeStatus | None, Any]:
        """The episode's status now (None: no record) and its result's JSON once it ended:
        what a registered waiter checks."""
        async with self._reads:
            return await read_outcome(self._redis, episode_id)

    async def outcomes(self, episode_ids: Sequence[str]) -> list[tuple[EpisodeStatus | None, Any]]:
        """`outcome` of many episodes, in one round trip."""
        async with self._reads:
            return await read_outcomes(self._redis, episode_ids)

    def register(self, episode_id: str) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[episode_id].add(future)
        return future

    def unregister(self, episode_id: str, future: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(episode_id)
        if waiters is not None:
            waiters.discard(future)
            if not waiters:
                del self._waiters[episode_id]

    def _wake(self, episode_id: str) -> None:
        for future in self._waiters.pop(episode_id, ()):
            if not future.done():
                future.set_result(None)

    def _wake_all(self) -> None:
        """After a reconnect events may have been lost: let every waiter re-read its record."""
        for episode_id in list(self._waiters):
            self._wake(episode_id)

    async def _listen(self) -> None:
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(keys.EVENTS)
                self._subscribed.set()
                async for message in pubsub.listen():
                    data = message.get("data")
                    if isinstance(data, bytes):
                        data = data.decode()
                    if isinstance(data, str):
                        self._wake(data)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: keep serving, retry, re-check waiters
                log.warning("event subscription lost (%s); reconnecting", exc)
                self._wake_all()
                await asyncio.sleep(EVENTS_RECONNECT_S)
            finally:
                with contextlib.suppress(Exception):
                    # untyped before redis 8
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
