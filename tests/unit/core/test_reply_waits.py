"""The API's waits for workers' replies against a real Redis: a batch's worth at once, each
holding its own connection until its reply."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis

from core import keys
from core.store import EpisodeStore
from core.store.steps import ReplyWaiter

WAITS = 150  # more than redis-py's default pool (100), as a batch's finishes are


@pytest.mark.redis
def test_more_waits_at_once_than_redis_py_pools_by_default_all_get_their_reply(
    redis_url: str, redis_client: redis.Redis
) -> None:
    store = EpisodeStore(redis_client)
    replies = [keys.reply(uuid.uuid4().hex) for _ in range(WAITS)]

    async def run() -> list[object]:
        waiter = ReplyWaiter(redis_url, longest_wait_s=60)
        try:
            waits = [asyncio.create_task(waiter.wait(key, 30)) for key in replies]
            await asyncio.sleep(0.5)  # every wait is blocked on its key
            assert not any(w.done() for w in waits), [w.exception() for w in waits if w.done()]
            for n, key in enumerate(replies):
                store.reply(key, body={"n": n})
            return await asyncio.gather(*waits)
        finally:
            await waiter.close()

    answers = asyncio.run(run())
    assert answers == [{"status": 200, "body": {"n": n}, "message": None} for n in range(WAITS)]
