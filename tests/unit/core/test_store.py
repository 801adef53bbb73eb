"""The store against a real Redis: typed sandbox state, the generated statuses in its scripts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from core import keys
from core.store import Admission, EpisodeStore, MissingSandbox, SandboxState
from proctor.models import EpisodeCreate, EpisodeMode, EpisodeResult, EpisodeStatus, Observation

REQUEST = EpisodeCreate.model_validate(
    {"mode": "interactive", "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}}
)


def state() -> SandboxState:
    return SandboxState(
        host="host-1",
        container_id="c0ffee",
        container_name="proctor-sb-1",
        container_ip=None,
        keep=frozenset({"pytest.ini", "conftest.py"}),
        restore={"tests/test_x.py": "def test_x(): pass\n", "tests/data.bin": b"\xff\x00\xfe"},
        observation=Observation(output="a\nb\n", exit_code=0, duration_s=0.5),
        sandbox_start_s=0.25,
        warm=True,
    )


def created(store: EpisodeStore, request: EpisodeCreate = REQUEST, dedup: str | None = None) -> str:
    admission = store.create([request], dedup_keys=[dedup], max_queued=100, dedup_ttl_s=60)
    assert not admission.refused
    return admission.ids[0]


@pytest.mark.redis
def test_sandbox_state_round_trips_through_the_record(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    episode_id = created(store)
    record = store.get(episode_id)
    assert record is not None and record.sandbox is None
    with pytest.raises(MissingSandbox):
        record.started_sandbox()
    assert store.advance(episode_id, EpisodeStatus.starting, worker="w1", host="host-1")
    assert store.queued_count() == 0
    assert store.start_sandbox(episode_id, state())
    store.touch(episode_id, at=1234.5)
    record = store.get(episode_id)
    assert record is not None
    assert (record.status, record.worker, record.host) == (EpisodeStatus.running, "w1", "host-1")
    assert record.started_sandbox() == state()
    assert record.last_action == 1234.5
    summary = {s.id: s for s in store.live_summaries()}[episode_id]
    assert summary.interactive and summary.last_action == 1234.5


@pytest.mark.redis
def test_an_ended_episode_moves_no_further(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    episode_id = created(store)
    ended = EpisodeResult(
        id=episode_id, status=EpisodeStatus.cancelled, mode=EpisodeMode.interactive
    )
    assert store.finish(ended)
    assert not store.finish(ended)
    assert not store.advance(episode_id, EpisodeStatus.running)
    assert not store.start_sandbox(episode_id, state())
    record = store.get(episode_id)
    assert record is not None and record.status is EpisodeStatus.cancelled
    assert record.sandbox is None and record.finished is not None
    assert episode_id not in store.active_ids()


@pytest.mark.redis
def test_identical_requests_share_until_one_fails(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    request = REQUEST.model_copy(update={"mode": EpisodeMode.oneshot})
    dedup = keys.dedup("identical-requests")
    redis_client.delete(dedup)
    first = created(store, request, dedup)
    assert created(store, request, dedup) == first
    assert store.finish(
        EpisodeResult(id=first, status=EpisodeStatus.failed, mode=EpisodeMode.oneshot)
    )
    assert created(store, request, dedup) != first


@pytest.fixture
def fresh_queue(redis_client: redis.Redis) -> Iterator[EpisodeStore]:
    """A store over an empty queue with no pace measured yet (both emptied again after)."""
    redis_client.delete(keys.QUEUED, keys.PACE)
    yield EpisodeStore(redis_client)
    redis_client.delete(keys.QUEUED, keys.PACE)


def gap(redis_client: redis.Redis) -> float | None:
    raw = redis_client.hget(keys.PACE, "gap")
    return float(raw) if raw is not None else None


@pytest.mark.redis
def test_the_pace_counts_gaps_between_starts_only_while_episodes_wait(
    redis_client: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    store = fresh_queue
    waiting = [created(store) for _ in range(4)]
    for episode_id in waiting:  # the first start begins the measure; three gaps of ~50 ms
        assert store.advance(episode_id, EpisodeStatus.starting)
        time.sleep(0.05)
    measured = gap(redis_client)
    assert measured is not None and 0.04 <= measured < 0.5
    assert redis_client.hget(keys.PACE, "at") is None  # the queue ran empty
    time.sleep(0.3)  # idle: no episode waited
    assert store.advance(created(store), EpisodeStatus.starting)
    assert gap(redis_client) == measured
    # a later status of a started episode is no start
    assert store.advance(waiting[0], EpisodeStatus.running)
    assert gap(redis_client) == measured


@pytest.mark.redis
def test_the_wait_bound_refuses_what_would_wait_past_it(
    redis_client: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    store = fresh_queue

    def admit(count: int, max_wait_s: float) -> Admission:
        return store.create(
            [REQUEST] * count,
            dedup_keys=[None] * count,
            max_queued=1000,
            max_wait_s=max_wait_s,
            dedup_ttl_s=60,
        )

    redis_client.hset(keys.PACE, "gap", "0.1")  # a start every 100 ms
    assert not admit(20, 0.5).refused  # nothing queued: a batch past the bound still gets in
    refused = admit(1, 1.5)  # the 21st would wait ~2.1 s
    assert refused.refused and refused.depth == 20 and refused.wait_s == pytest.approx(2.1)
    assert not admit(1, 2.5).refused
    assert not admit(1, 0.0).refused  # no wait bound: the depth bound only
    assert store.queued_count() == 22
