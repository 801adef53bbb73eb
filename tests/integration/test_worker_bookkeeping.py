"""The worker leaves out RQ's bookkeeping writes that change nothing — a state already
written, a heartbeat right after one that reached as far — and sends every other one."""

from __future__ import annotations

import time

import redis
from rq import Queue
from rq.serializers import JSONSerializer

from workers.main import LISTENER_POLL_S, EpisodeWorker


def worker(client: redis.Redis) -> EpisodeWorker:
    queue = Queue("bookkeeping-test", connection=client, serializer=JSONSerializer)
    return EpisodeWorker([queue], connection=client, serializer=JSONSerializer, name="bk-test")


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
