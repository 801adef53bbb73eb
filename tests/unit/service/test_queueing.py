"""The queue's bounds as a client meets them: a 429 that says why and when to retry."""

from __future__ import annotations

import pytest
import redis

from core import keys
from core.store import EpisodeStore
from proctor.models import EpisodeCreate
from service.errors import Overloaded
from service.queueing import EpisodeQueue

REQUEST = EpisodeCreate.model_validate(
    {
        "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": ""}},
    }
)


@pytest.mark.redis
def test_a_refusal_by_the_wait_bound_says_when_to_retry(redis_client: redis.Redis) -> None:
    queue = EpisodeQueue(redis_client, EpisodeStore(redis_client), max_wait_s=1.0)
    # 30 waiting (ids only: no job a later test's workers would take) at a start per 100 ms
    redis_client.delete(keys.QUEUED)
    redis_client.zadd(keys.QUEUED, {f"ep_waiting{i}": i for i in range(30)})
    redis_client.hset(keys.PACE, "gap", "0.1")
    try:
        with pytest.raises(Overloaded) as refused:
            queue.submit([REQUEST])
    finally:
        redis_client.delete(keys.QUEUED, keys.PACE)
    assert refused.value.headers == {"Retry-After": "3"}  # 3.1 s of waiting, 1 s admitted
    assert "3.1 s of waiting" in refused.value.message
