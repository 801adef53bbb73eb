"""The queue's bounds as a client meets them: a 429 that says why and when to retry."""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq import Queue
from rq.serializers import JSONSerializer

from core import keys
from core.defaults import COMPILE_WALL_FACTOR, COMPILE_WALL_SLACK_S, JOB_OVERHEAD_S
from core.queues import FINISH_EPISODE, RUN_ACTION, served_queues
from core.store import EpisodeStore
from proctor.models import EpisodeCreate
from service.errors import Overloaded
from service.queueing import EpisodeQueue, job_timeout_s

REQUEST = EpisodeCreate.model_validate(
    {
        "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": ""}},
    }
)


@pytest.fixture
def queue(quiet_redis: redis.Redis) -> Iterator[EpisodeQueue]:
    """A queue with a wait bound of 1 s, 30 episodes waiting (ids only: no job a later
    test's workers would take) and two live workers."""
    quiet_redis.delete(keys.QUEUED, keys.PACE, keys.WORKERS)
    quiet_redis.zadd(keys.QUEUED, {f"ep_waiting{i}": i for i in range(30)})
    quiet_redis.zadd(keys.WORKERS, {"w1": time.time(), "w2": time.time()})
    yield EpisodeQueue(quiet_redis, EpisodeStore(quiet_redis), max_wait_s=1.0)
    quiet_redis.delete(keys.QUEUED, keys.PACE, keys.WORKERS)


@pytest.mark.redis
def test_a_refusal_by_the_wait_bound_says_when_to_retry(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.hset(keys.PACE, "busy", "0.2")  # 10 episodes/s
    with pytest.raises(Overloaded) as refused:
        queue.submit([REQUEST])
    # 30 ahead: it would start in 3 s; by 2 s from now the queue has drained to the bound
    assert refused.value.headers == {"Retry-After": "2"}
    assert "3.0 s of waiting" in refused.value.message


@pytest.mark.redis
def test_after_a_refusal_the_door_stays_shut_until_the_queue_would_take_one_more(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.hset(keys.PACE, "gap", "0.06")  # a new one would start in 30 * 0.06 s
    with pytest.raises(Overloaded):
        queue.submit([REQUEST])
    # for the next 0.8 s the refusal is this process's own, without asking Redis
    quiet_redis.delete(keys.QUEUED)
    with pytest.raises(Overloaded) as shut:
        queue.submit([REQUEST])
    assert "over its bound" in shut.value.message
    assert shut.value.headers == {"Retry-After": "1"}
    time.sleep(0.9)
    queue.check_open()


def different(n: int) -> list[EpisodeCreate]:
    return [REQUEST.model_copy(update={"metadata": {"n": str(i)}}) for i in range(n)]


@pytest.mark.redis
def test_a_batch_is_judged_by_when_its_first_episode_would_start(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    """A trainer's batch into a short queue is admitted whole, however long it is itself;
    the next submission then waits behind all of it."""
    quiet_redis.hset(keys.PACE, "gap", "0.01")  # its first would start in 30 * 0.01 s
    ids = queue.submit(different(512))  # its last would start in 5.4 s: admitted all the same
    assert len(ids) == len(set(ids)) == 512
    assert quiet_redis.zcard(keys.QUEUED) == 30 + 512
    queue.check_open()
    with pytest.raises(Overloaded) as refused:
        queue.submit(different(64))  # 542 ahead: it would start in 5.42 s
    assert refused.value.headers == {"Retry-After": "5"}  # 4.42 s until 1 s is left
    assert quiet_redis.zcard(keys.QUEUED) == 30 + 512  # refused whole: nothing written


@pytest.mark.redis
def test_a_batch_into_a_long_queue_is_refused_whole(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.hset(keys.PACE, "gap", "0.04")  # its first would start in 1.2 s
    with pytest.raises(Overloaded) as refused:
        queue.submit(different(64))
    assert refused.value.headers == {"Retry-After": "1"}
    assert quiet_redis.zcard(keys.QUEUED) == 30


@pytest.mark.redis
def test_into_an_empty_queue_any_batch_passes_the_wait_bound(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.delete(keys.QUEUED)
    quiet_redis.hset(keys.PACE, "gap", "10")  # a slow drain: but nothing is ahead
    assert len(queue.submit(different(8))) == 8


@pytest.mark.redis
def test_a_held_request_is_bound_by_its_own_patience_not_the_door(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    """An adapter's request (`patience_s`) is admitted if it would start within what its
    client waits, past the deployment's bound and with the door shut; past its patience it
    is refused without shutting the door for the others."""
    quiet_redis.hset(keys.PACE, "gap", "0.1")  # 30 ahead: 3 s
    with pytest.raises(Overloaded):
        queue.submit([REQUEST])  # past the bound of 1 s: the door shuts
    with pytest.raises(Overloaded):
        queue.check_open()
    [held] = queue.submit([REQUEST], patience_s=8.0)
    assert quiet_redis.zscore(keys.QUEUED, held) is not None
    with pytest.raises(Overloaded) as refused:
        queue.submit([REQUEST], patience_s=2.0)  # 31 ahead: 3.1 s
    assert refused.value.headers == {"Retry-After": "2"}  # 1.1 s until 2 s are left
    unbounded = EpisodeQueue(quiet_redis, queue.store, max_wait_s=0.0)
    unbounded.submit([REQUEST], patience_s=0.5)  # no wait bound in this deployment at all
    unbounded.check_open()


@pytest.mark.redis
def test_when_the_door_opens_one_request_finds_out_while_the_others_are_refused(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.hset(keys.PACE, "gap", "0.035")  # shut for 30 * 0.035 - 1 = 0.05 s
    with pytest.raises(Overloaded):
        queue.submit([REQUEST])
    time.sleep(0.1)
    probe, other = contextvars.Context(), contextvars.Context()  # two requests
    probe.run(queue.check_open)  # let through: it asks Redis
    probe.run(queue.check_open)  # and passes the checks after the door, too
    with pytest.raises(Overloaded) as waiting:
        other.run(queue.check_open)
    assert "finding out" in waiting.value.message
    other.run(queue.leave)  # not the probe: nothing changes
    with pytest.raises(Overloaded):
        other.run(queue.check_open)
    probe.run(queue.leave)  # answered before Redis was asked (a bad body)
    other.run(queue.check_open)  # the next one finds out instead
    quiet_redis.delete(keys.QUEUED)  # the queue drained
    other.run(queue.submit, [REQUEST])  # Redis admits it: the door is open for all
    contextvars.Context().run(queue.check_open)
    contextvars.Context().run(queue.check_open)


@pytest.mark.redis
async def test_requests_past_the_intake_lanes_wait_and_are_refused_if_the_door_shuts(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    quiet_redis.hset(keys.PACE, "gap", "0.05")  # a refusal shuts the door for 0.5 s
    one_lane = EpisodeQueue(quiet_redis, queue.store, max_wait_s=1.0, intake_lanes=1)
    answer = asyncio.Event()

    async def request() -> None:
        await one_lane.enter()
        await answer.wait()
        one_lane.leave()

    first = asyncio.create_task(request())
    await asyncio.sleep(0.01)
    second = asyncio.create_task(one_lane.enter())
    await asyncio.sleep(0.05)
    assert not second.done()  # waits for the lane
    with pytest.raises(Overloaded):
        one_lane.submit([REQUEST])  # Redis refuses: the door shuts
    answer.set()
    await first
    with pytest.raises(Overloaded) as refused:
        await second  # its turn came with the door shut: refused there, the lane given back
    assert "over its bound" in refused.value.message
    await asyncio.sleep(0.6)
    await asyncio.wait_for(one_lane.enter(), 1)  # the door open again, and the lane free


def test_a_jobs_time_covers_a_compile_at_its_wall_clock_bound() -> None:
    # a compile is stopped by the wall clock only at COMPILE_WALL_FACTOR times its limit:
    # the job must outlast that, or RQ ends an honest compile on a busy host as our failure
    compiled = EpisodeCreate.model_validate(
        {
            "task": {
                "image": "cpp",
                "language": "cpp",
                "tests": {"format": "exit_code"},
                "limits": {"timeout_s": 10, "compile_timeout_s": 60},
            },
            "solution": {"files": {"main.cpp": "int main(){}"}},
        }
    )
    bound = 60 * COMPILE_WALL_FACTOR + COMPILE_WALL_SLACK_S
    assert job_timeout_s(compiled) == int(10 + bound + JOB_OVERHEAD_S)
    assert job_timeout_s(REQUEST) == int(REQUEST.task.limits.timeout_s + JOB_OVERHEAD_S)


@pytest.mark.redis
def test_an_action_is_taken_before_the_finishes_queued_ahead_of_it(
    quiet_redis: redis.Redis, queue: EpisodeQueue
) -> None:
    """A batch's finishes (each a test run) queued on a host do not hold up an agent's
    next action: a worker there takes the action first, then the finishes in order."""
    host = f"test-{uuid.uuid4().hex[:8]}"
    served = [
        Queue(n, connection=quiet_redis, serializer=JSONSerializer) for n in served_queues(host)
    ]
    try:
        for n in range(3):
            queue.to_host(host, FINISH_EPISODE, [f"ep_{n}", f"reply-{n}"], timeout_s=10)
        queue.to_host(host, RUN_ACTION, ["ep_9", {"type": "bash"}, "reply-9"], timeout_s=10)
        taken = []
        while found := Queue.dequeue_any(
            served, None, connection=quiet_redis, serializer=JSONSerializer
        ):
            job, _ = found
            taken.append((job.func_name, job.args[0]))
            job.delete()
        assert taken == [
            (RUN_ACTION, "ep_9"),
            (FINISH_EPISODE, "ep_0"),
            (FINISH_EPISODE, "ep_1"),
            (FINISH_EPISODE, "ep_2"),
        ]
    finally:
        for q in served[:2]:  # the host's own; the shared queue is not ours to empty
            q.delete(delete_jobs=True)
