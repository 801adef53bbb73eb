"""The store's lean reads against a real Redis: what the API's waits and the janitors read
instead of whole records, and which status changes are published for the waits."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio as aioredis

from core import keys
from core.store import EpisodeStore, read_outcome
from proctor.models import EpisodeCreate, EpisodeMode, EpisodeResult, EpisodeStatus

ONESHOT = EpisodeCreate.model_validate(
    {
        "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": "x = 1\n"}},
        "metadata": {"sample": "7"},
    }
)
INTERACTIVE = EpisodeCreate.model_validate(
    {"mode": "interactive", "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}}
)


def created(store: EpisodeStore, request: EpisodeCreate) -> str:
    admission = store.create([request], dedup_keys=[None], max_queued=100, dedup_ttl_s=60)
    assert not admission.refused
    return admission.ids[0]


@pytest.mark.redis
def test_public_reads_the_result_alone_once_ended(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    assert store.public("ep_unknown") is None
    episode_id = created(store, ONESHOT)
    live = store.public(episode_id)
    record = store.get(episode_id)
    assert record is not None and live == record.public()
    assert live.status is EpisodeStatus.queued and live.metadata == {"sample": "7"}
    result = EpisodeResult(id=episode_id, status=EpisodeStatus.completed, reward=1.0)
    assert store.finish(result)
    ended = store.public(episode_id)
    record = store.get(episode_id)
    assert record is not None and ended == record.public()
    assert ended is not None and ended.reward == 1.0 and ended.finished_at is not None


@pytest.mark.redis
def test_read_outcome_gives_the_status_then_the_result(
    redis_client: redis.Redis, redis_url: str
) -> None:
    store = EpisodeStore(redis_client)
    episode_id = created(store, ONESHOT)

    async def outcome(eid: str) -> tuple[EpisodeStatus | None, object]:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await read_outcome(client, eid)
        finally:
            await client.aclose()

    assert asyncio.run(outcome("ep_unknown")) == (None, None)
    assert asyncio.run(outcome(episode_id)) == (EpisodeStatus.queued, None)
    result = EpisodeResult(id=episode_id, status=EpisodeStatus.completed, reward=0.0)
    assert store.finish(result)
    status, raw = asyncio.run(outcome(episode_id))
    assert status is EpisodeStatus.completed
    assert EpisodeResult.model_validate_json(raw) == store.public(episode_id)


@pytest.mark.redis
def test_only_what_a_wait_waits_for_is_published(redis_client: redis.Redis) -> None:
    """A one-shot episode's end; an interactive one's readiness and end. Nothing else wakes
    the API's waiters."""
    store = EpisodeStore(redis_client)
    oneshot, interactive = created(store, ONESHOT), created(store, INTERACTIVE)
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(keys.EVENTS)
    try:
        for episode_id in (oneshot, interactive):
            assert store.advance(episode_id, EpisodeStatus.starting, worker="w", host="h")
            assert store.advance(episode_id, EpisodeStatus.running)
            assert store.advance(episode_id, EpisodeStatus.evaluating)
        for episode_id, mode in ((oneshot, EpisodeMode.oneshot), (interactive, INTERACTIVE.mode)):
            ended = EpisodeResult(id=episode_id, status=EpisodeStatus.completed, mode=mode)
            assert store.finish(ended)
        # channels are server-wide: other tests' episodes may publish too
        ours, seen = {oneshot, interactive}, []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.1)
            if message is not None and message["data"].decode() in ours:
                seen.append(message["data"].decode())
    finally:
        pubsub.close()
    assert seen == [interactive, oneshot, interactive]
    record = store.get(oneshot)
    assert record is not None and (record.worker, record.host) == ("w", "h")


@pytest.mark.redis
def test_live_summaries_leave_queued_episodes_out(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    queued, started = created(store, ONESHOT), created(store, INTERACTIVE)
    assert store.advance(started, EpisodeStatus.starting, worker="w", host="h")
    summaries = {s.id: s for s in store.live_summaries()}
    assert started in summaries and queued not in summaries
    assert summaries[started].worker == "w" and summaries[started].interactive
