"""The worker leaves out RQ's bookkeeping writes that change nothing — a state already
written, a heartbeat right after one that reached as far — and sends every other one,
together where RQ would send them one round trip each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from rq import Queue
from rq.exceptions import StopRequested
from rq.serializers import JSONSerializer
from rq.suspension import resume, suspend

from workers.main import HEARTBEAT_SKIP_S, LISTENER_POLL_S, EpisodeWorker


def worker(client: redis.Redis, name: str = "bk-test") -> EpisodeWorker:
    queue = Queue(name, connection=client, serializer=JSONSerializer)
    return EpisodeWorker([queue], connection=client, serializer=JSONSerializer, name=name)


def test_a_state_already_written_is_not_written_again(redis_client: redis.Redis) -> None:
    w = worker(redis_client)
    w.set_state("idle")
    assert redis_client.hget(w.key, "state") == b"idle"
    redis_client.hset(w.key, "state", "marker")  # would be overwritten by a second write
    w.set_state("idle")
    assert redis_client.hget(w.key, "state") == b"marker" and w.get_state() == "idle"
    with redis_client.pipeline() as pipe:  # a pipelined write counts as written
        w.set_state("busy", pipeline=pipe)
        pipe.execute()
    w.set_state("idle")
    assert redis_client.hget(w.key, "state") == b"idle"


def test_a_heartbeat_is_skipped_only_when_the_last_one_reached_as_far(
    redis_client: redis.Redis,
) -> None:
    w = worker(redis_client)
    w.heartbeat()
    assert redis_client.ttl(w.key) > 0
    redis_client.persist(w.key)
    w.heartbeat()  # a moment later, asking for no later expiry: nothing new to say
    assert redis_client.ttl(w.key) == -1
    w.heartbeat(timeout=100_000)  # further out than the last: sent
    assert redis_client.ttl(w.key) > 90_000
    redis_client.persist(w.key)
    with redis_client.pipeline() as pipe:  # pipelined heartbeats always go through
        w.heartbeat(timeout=50, pipeline=pipe)
        pipe.execute()
    assert 0 < redis_client.ttl(w.key) <= 50
    w.heartbeat()  # the default TTL reaches further than 50 s: sent
    assert redis_client.ttl(w.key) > 50


@contextmanager
def round_trips(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times a command or a pipeline took a connection to Redis meanwhile."""
    count = [0]
    pool = client.connection_pool
    taken = pool.get_connection

    def counted(*args: object, **kwargs: object) -> object:
        count[0] += 1
        return taken(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(pool, "get_connection", counted)
        yield count


def test_a_heartbeat_is_one_round_trip(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = worker(redis_client)
    with round_trips(redis_client, monkeypatch) as count:
        w.heartbeat()
    assert count == [1]
    assert redis_client.ttl(w.key) > 0 and redis_client.hget(w.key, "last_heartbeat")


def test_a_jobs_end_says_idle_with_the_next_heartbeat(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = worker(redis_client, "bk-job-test")
    redis_client.delete(w.key)
    queue = w.queues[0]
    queue.empty()
    job = queue.enqueue("builtins.len", "four")
    w.register_birth()
    try:
        dequeued = w.dequeue_job_and_maintain_ttl(1)
        assert dequeued is not None and dequeued[0].id == job.id
        w.execute_job(dequeued[0], queue)
        assert job.latest_result() is not None and job.latest_result().return_value == 4
        assert redis_client.hget(w.key, "state") == b"idle"
        # the job's heartbeat at its end is saved with the job, not on its own before
        stored = redis_client.hmget(job.key, ["last_heartbeat", "ended_at"])
        assert stored[0] and stored[0] == stored[1]
        with round_trips(redis_client, monkeypatch) as count:
            w.heartbeat()  # RQ's loop sends this right after the job: already said
        assert count == [0]
        assert redis_client.ttl(w.key) > 0
    finally:
        w.register_death()


def test_suspension_is_asked_at_most_every_skip_interval_and_then_honoured(
    quiet_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a database of its own: a suspension there holds no other test's workers."""
    w = worker(quiet_redis, "bk-suspend-test")
    resume(quiet_redis)
    w.check_for_suspension(burst=True)  # not suspended: goes on
    suspend(quiet_redis)
    try:
        with round_trips(quiet_redis, monkeypatch) as count:
            w.check_for_suspension(burst=True)  # just asked: not again yet
        assert count == [0]
        time.sleep(HEARTBEAT_SKIP_S)
        with pytest.raises(StopRequested):  # a suspended burst worker stops
            w.check_for_suspension(burst=True)
    finally:
        resume(quiet_redis)


def test_a_stopping_worker_does_not_wait_out_its_listener(quiet_redis: redis.Redis) -> None:
    """Stopping, RQ unsubscribes from its control channel and waits for the listener
    thread. A listener that already read the unsubscription waits for a subscription until
    its poll runs out before it looks at its stop flag (RQ's: a minute): the stop must not
    take that long."""
    w = worker(quiet_redis)
    w.subscribe()
    w.pubsub.unsubscribe()  # the listener reads this itself, then waits for a subscription
    deadline = time.monotonic() + 5
    while w.pubsub.subscribed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not w.pubsub.subscribed
    started = time.monotonic()
    w.unsubscribe()
    assert time.monotonic() - started < LISTENER_POLL_S + 2  # not RQ's 60 s
    assert not w.pubsub_thread.is_alive()
