"""The judge's verdict cache: shared through Redis, and a memory LRU that outlives a Redis
outage without costing reviews their budget."""

from __future__ import annotations

import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from anticheat.judge.cache import VerdictCache
from anticheat.judge.prompt import JudgeVerdict

# ---------------------------------------------------------------------------- cache


VERDICT = JudgeVerdict(cheat=True, category="network_fetch", confidence=0.8, rationale="curl")


@pytest.mark.redis
def test_cache_is_shared_through_redis_with_a_ttl(redis_client: redis.Redis) -> None:
    key = f"test-{uuid.uuid4().hex}"
    VerdictCache(redis_client, ttl_s=60).put(key, VERDICT)
    try:
        assert 0 < int(redis_client.ttl(f"proctor:judge:{key}")) <= 60
        other_process = VerdictCache(redis_client, ttl_s=60)
        assert other_process.get(key) == VERDICT
        assert other_process.get(f"{key}-other") is None
    finally:
        redis_client.delete(f"proctor:judge:{key}")


def test_cache_falls_back_to_memory_and_backs_off_when_redis_is_down() -> None:
    # no retries: the back-off, not the client's retry policy, is what is tested
    dead = redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    cache = VerdictCache(dead, ttl_s=60, backoff_s=60)
    assert cache.get("k") is None  # the failed read trips the back-off
    calls: list[str] = []
    dead.get = lambda *a, **k: calls.append("get")  # type: ignore[method-assign]
    dead.set = lambda *a, **k: calls.append("set")  # type: ignore[method-assign]
    cache.put("k", VERDICT)
    assert cache.get("k") == VERDICT
    assert cache.get("other") is None
    assert calls == []  # Redis left alone while backing off
    dead.close()


def test_memory_cache_evicts_the_least_recent() -> None:
    cache = VerdictCache(None, ttl_s=60, max_entries=2)
    for key in ("a", "b"):
        cache.put(key, VERDICT)
    assert cache.get("a") == VERDICT  # a is now the most recent
    cache.put("c", VERDICT)
    assert cache.get("b") is None and cache.get("a") == VERDICT
