"""The store against a real Redis: typed sandbox state, the generated statuses in its scripts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from core import keys
from core.store import (
    GAP_WEIGHT,
    PACE_WEIGHT,
    Admission,
    EpisodeStore,
    MissingSandbox,
    SandboxState,
)
from proctor.models import (
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    Timings,
)

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
def test_sandbox_state_round_trips_through_the_record(quiet_redis: redis.Redis) -> None:
    store = EpisodeStore(quiet_redis)
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
def test_an_ended_episode_moves_no_further(quiet_redis: redis.Redis) -> None:
    store = EpisodeStore(quiet_redis)
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
def test_identical_requests_share_until_one_fails(quiet_redis: redis.Redis) -> None:
    store = EpisodeStore(quiet_redis)
    request = REQUEST.model_copy(update={"mode": EpisodeMode.oneshot})
    dedup = keys.dedup("identical-requests")
    quiet_redis.delete(dedup)
    first = created(store, request, dedup)
    assert created(store, request, dedup) == first
    assert store.finish(
        EpisodeResult(id=first, status=EpisodeStatus.failed, mode=EpisodeMode.oneshot)
    )
    assert created(store, request, dedup) != first


@pytest.fixture
def fresh_queue(quiet_redis: redis.Redis) -> Iterator[EpisodeStore]:
    """A store over an empty queue, no pace measured yet and no worker alive (all emptied
    again after)."""
    quiet_redis.delete(keys.QUEUED, keys.PACE, keys.WORKERS)
    yield EpisodeStore(quiet_redis)
    quiet_redis.delete(keys.QUEUED, keys.PACE, keys.WORKERS)


def busy(quiet_redis: redis.Redis) -> float | None:
    raw = quiet_redis.hget(keys.PACE, "busy")
    return float(raw) if raw is not None else None


def ended(store: EpisodeStore, mode: EpisodeMode, *, queued_s: float, total_s: float) -> None:
    request = REQUEST.model_copy(update={"mode": mode})
    result = EpisodeResult(
        id=created(store, request),
        status=EpisodeStatus.completed,
        mode=mode,
        timings=Timings(queued_s=queued_s, total_s=total_s),
    )
    assert store.finish(result)


@pytest.mark.redis
def test_the_pace_is_a_workers_mean_time_on_a_oneshot_episode(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=5.0, total_s=6.0)
    assert busy(quiet_redis) == pytest.approx(1.0)  # the first sets it; waiting is no work
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=2.0)
    assert busy(quiet_redis) == pytest.approx(1.0 + (2.0 - 1.0) * PACE_WEIGHT)
    measured = busy(quiet_redis)
    # an interactive episode's life is mostly its agent's thinking, not a worker's time
    ended(fresh_queue, EpisodeMode.interactive, queued_s=0.0, total_s=600.0)
    assert busy(quiet_redis) == measured


def pace(quiet_redis: redis.Redis, field: str) -> float | None:
    raw = quiet_redis.hget(keys.PACE, field)
    return float(raw) if raw is not None else None


@pytest.mark.redis
def test_the_drain_rate_is_the_gap_between_ends_while_episodes_wait(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    waiting = [created(fresh_queue) for _ in range(3)]  # they stay queued throughout
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    assert pace(quiet_redis, "gap") is None  # one end: no gap yet
    time.sleep(0.2)
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    first = pace(quiet_redis, "gap")
    assert first is not None and 0.2 <= first < 1.0
    time.sleep(0.1)
    ended(fresh_queue, EpisodeMode.interactive, queued_s=0.0, total_s=60.0)  # any end drains
    gap = pace(quiet_redis, "gap")  # the mean of the two gaps (the second 0.1 s and a bit)
    assert gap is not None
    assert (first + 0.1) / 2 <= gap <= (first + 1.0) / 2
    # with nothing waiting, workers may idle: a gap then says nothing of the drain rate
    quiet_redis.delete(keys.QUEUED)
    measured = pace(quiet_redis, "gap")
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    time.sleep(0.3)
    quiet_redis.zadd(keys.QUEUED, {waiting[0]: time.time()})
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)  # the last end: idle
    assert pace(quiet_redis, "gap") == measured


@pytest.mark.redis
def test_the_drain_rate_is_a_mean_of_the_first_gaps_then_a_moving_average(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    created(fresh_queue)  # it stays queued throughout
    quiet_redis.hset(keys.PACE, mapping={"last": "0", "waiting": "1"})
    for gap in [1.0] + [0.0] * 19:  # a slow start, then ends at once: 20 gaps of Redis's clock
        quiet_redis.hset(keys.PACE, "last", str(time.time() - gap))
        ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    mean = pace(quiet_redis, "gap")
    assert mean is not None and 0.05 <= mean < 0.06  # the mean of 20, not 1.0 * 0.95^19
    assert pace(quiet_redis, "gaps") == 1 / GAP_WEIGHT
    quiet_redis.hset(keys.PACE, "last", str(time.time() - 1.0))
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    moved = pace(quiet_redis, "gap")  # from now on by GAP_WEIGHT
    assert moved is not None
    assert moved == pytest.approx(mean + (1.0 - mean) * GAP_WEIGHT, abs=0.005)


@pytest.mark.redis
def test_a_gap_in_which_the_queue_ran_dry_is_no_drain(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    """Episodes waited at both ends, but in between the last waiting one was taken and the
    workers may have idled (a pause between two bursts): that gap is not counted."""
    waiting = created(fresh_queue)
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    time.sleep(0.05)
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    measured = pace(quiet_redis, "gap")
    assert measured is not None
    assert fresh_queue.advance(waiting, EpisodeStatus.starting, worker="w1")  # the queue is dry
    time.sleep(0.3)
    created(fresh_queue)  # the next burst
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    assert pace(quiet_redis, "gap") == measured
    time.sleep(0.05)  # episodes waited throughout since that end: counted again
    before = quiet_redis.hgetall(keys.PACE), quiet_redis.zcard(keys.QUEUED)
    ended(fresh_queue, EpisodeMode.oneshot, queued_s=0.0, total_s=1.0)
    gap = pace(quiet_redis, "gap")
    # the pace and the queue before and after: if this fails, which premise went
    after = quiet_redis.hgetall(keys.PACE), quiet_redis.zcard(keys.QUEUED)
    assert pace(quiet_redis, "gaps") == 2, (before, after)
    assert gap is not None and gap != measured, (before, after)


@pytest.mark.redis
def test_the_wait_bound_counts_the_drain_rate_once_measured(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    quiet_redis.zadd(keys.WORKERS, {"w1": time.time()})
    quiet_redis.hset(keys.PACE, mapping={"busy": "0.01", "gap": "0.1"})  # 10 ends a second
    assert not fresh_queue.create(
        [REQUEST] * 10, dedup_keys=[None] * 10, max_queued=1000, max_wait_s=5, dedup_ttl_s=60
    ).refused
    refused = fresh_queue.create(
        [REQUEST], dedup_keys=[None], max_queued=1000, max_wait_s=0.95, dedup_ttl_s=60
    )
    assert refused.refused and refused.wait_s == pytest.approx(1.0)  # not 10 * 0.01
    assert refused.reopen_s == pytest.approx(0.05)  # half an end more and it passes


@pytest.mark.redis
def test_the_wait_bound_refuses_what_would_wait_past_it(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    def admit(count: int, max_wait_s: float) -> Admission:
        return fresh_queue.create(
            [REQUEST] * count,
            dedup_keys=[None] * count,
            max_queued=1000,
            max_wait_s=max_wait_s,
            dedup_ttl_s=60,
        )

    now = time.time()
    quiet_redis.zadd(keys.WORKERS, {"w1": now, "w2": now, "gone": now - 3600})
    assert not admit(20, 0.5).refused
    assert not admit(1, 0.5).refused  # no pace yet: the depth bound only
    quiet_redis.delete(keys.QUEUED)
    quiet_redis.hset(keys.PACE, "busy", "0.2")  # two live workers, 200 ms each: 10/s
    assert not admit(20, 1.5).refused  # nothing ahead of its first (its 20th waits ~2 s)
    refused = admit(1, 1.5)  # 20 ahead: it would start in ~2 s
    assert refused.refused and refused.depth == 20
    assert refused.wait_s == pytest.approx(2.0)
    assert admit(5, 1.5).refused  # a batch is refused whole, by its first
    assert not admit(1, 2.5).refused
    assert not admit(1, 0.0).refused  # no wait bound: the depth bound only
    assert fresh_queue.queued_count() == 22
    quiet_redis.delete(keys.QUEUED)
    assert not admit(40, 0.5).refused  # nothing queued: a batch past the bound still gets in


@pytest.mark.redis
def test_a_refusal_says_when_a_new_submission_would_pass(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    def admit(count: int, *, max_queued: int = 1000, max_wait_s: float = 0.0) -> Admission:
        return fresh_queue.create(
            [REQUEST] * count,
            dedup_keys=[None] * count,
            max_queued=max_queued,
            max_wait_s=max_wait_s,
            dedup_ttl_s=60,
        )

    assert not admit(10).refused
    # no drain rate known: no estimate
    assert admit(1, max_queued=10).reopen_s == 0.0
    quiet_redis.hset(keys.PACE, "gap", "0.1")
    # the depth bound: 10 queued, 8 admitted, so three ends before one more fits
    assert admit(1, max_queued=8).reopen_s == pytest.approx(0.3)
    # the wait bound: a new one would start in 1.0 s against 0.6 s, a batch as a single one
    assert admit(1, max_wait_s=0.6).reopen_s == pytest.approx(0.4)
    assert admit(50, max_wait_s=0.6).reopen_s == pytest.approx(0.4)
    # a batch too large for either bound, where a single one still fits: no wait for that
    large = admit(20, max_queued=25, max_wait_s=2.0)
    assert large.refused and large.reopen_s == 0.0


@pytest.mark.redis
def test_an_episode_leaving_the_queue_measures_its_wait_per_episode_ahead(
    quiet_redis: redis.Redis, fresh_queue: EpisodeStore
) -> None:
    """What the wait bound estimates, measured: also when the queue never stays full (a
    bound that thought the drain slow refused all but a queue of one or two, which ran dry
    between ends: the drain gaps alone then never corrected it)."""
    quiet_redis.hset(keys.PACE, mapping={"gap": "0.5", "gaps": "1"})  # thought slow
    first, second, third = (created(fresh_queue) for _ in range(3))  # 0, 1, 2 ahead
    assert fresh_queue.advance(first, EpisodeStatus.starting)  # none ahead: says nothing
    assert pace(quiet_redis, "gap") == 0.5
    time.sleep(0.1)
    assert fresh_queue.advance(second, EpisodeStatus.starting)  # ~0.1 s behind one
    after = pace(quiet_redis, "gap")
    assert after is not None and (0.5 + 0.1) / 2 <= after < (0.5 + 0.5) / 2
    assert pace(quiet_redis, "gaps") == 2
    assert fresh_queue.advance(third, EpisodeStatus.starting)  # ~0.1 s behind two: 0.05
    faster = pace(quiet_redis, "gap")
    assert faster is not None and faster < after
    assert fresh_queue.advance(third, EpisodeStatus.running)  # it left the queue once
    assert pace(quiet_redis, "gaps") == 3
