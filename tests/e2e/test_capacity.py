"""Capacity by resources: a host's budget, not its busy processes, decides what starts.

The share book against a real Redis (a full budget refuses, an idle host takes anything,
a dead worker's shares come back), and verl's load case over HTTP: six endless loops, then
two correct programs, which answer long before the loops reach their time limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from core import keys
from core.config import Settings
from core.limits import host_cpus
from core.store import EpisodeRecord, EpisodeStore, Share
from proctor.models import EpisodeCreate, EpisodeStatus, Solution, TaskSpec, TestSpec
from tests.conftest import claimed_database, running_service, wait_until
from tests.e2e.helpers import episode
from tests.pools import wait_for_warm_pools
from workers.capacity import HostBudget, reserve
from workers.janitor import Janitor
from workers.sandbox.engine import NoCapacity

WORKERS = 8
LOOP_S = 10.0
ADD = "def add(a, b):\n    return a + b\n"


# ------------------------------------------------------------------ the share book


@pytest.mark.redis
def test_a_full_budget_refuses_until_a_share_comes_back(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    host = "capacity-test-host"
    redis_client.delete(keys.reservations(host))
    budget = (2000, 4096)  # 2 CPUs, 4 GiB
    one = Share("w1", 1000, 512)
    assert store.reserve(host, "ep_a", one, budget=budget)
    assert store.reserve(host, "ep_b", Share("w2", 1000, 512), budget=budget)
    assert not store.reserve(host, "ep_c", Share("w1", 500, 512), budget=budget)
    assert store.reserve(host, "ep_a", one, budget=budget)  # held already: still ours
    store.release(host, "ep_a")
    assert store.reserve(host, "ep_c", Share("w1", 500, 512), budget=budget)
    # memory counts as much as CPUs
    assert not store.reserve(host, "ep_d", Share("w3", 100, 3500), budget=budget)
    # a dead worker's shares come back, and only its own
    assert store.release_of(host, "w1") == 1
    assert set(store.reservations(host)) == {"ep_b"}
    assert store.release_of(host, "w1", ["ep_b"]) == 0
    redis_client.delete(keys.reservations(host))


@pytest.mark.redis
def test_an_idle_host_takes_an_episode_larger_than_its_budget(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    host = "capacity-test-idle"
    redis_client.delete(keys.reservations(host))
    assert store.reserve(host, "ep_big", Share("w1", 8000, 64), budget=(2000, 4096))
    assert not store.reserve(host, "ep_small", Share("w1", 10, 64), budget=(2000, 4096))
    redis_client.delete(keys.reservations(host))


@pytest.mark.redis
def test_a_janitor_gives_back_what_stopped_workers_held(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    host = "capacity-test-janitor"
    redis_client.delete(keys.reservations(host))
    store.heartbeat("alive", host=host)
    janitor = Janitor(store, worker="me", host=host, heartbeat_s=1, heartbeat_ttl_s=30, sweep_s=10)
    budget = (8000, 8192)
    store.reserve(host, "ep_alive", Share("alive", 1000, 512), budget=budget)
    store.reserve(host, "ep_gone", Share("gone", 1000, 512), budget=budget)  # off the registry
    store.reserve(host, "ep_mine", Share("me", 1000, 512), budget=budget)  # no such episode
    janitor.busy.add("ep_busy")
    store.reserve(host, "ep_busy", Share("me", 1000, 512), budget=budget)
    assert janitor.shares.release(judging=False) == 2
    assert set(store.reservations(host)) == {"ep_alive", "ep_busy"}
    store.forget_worker("alive")
    redis_client.delete(keys.reservations(host))


def _clear(redis_client: redis.Redis, host: str) -> None:
    redis_client.delete(keys.reservations(host), keys.waiting(host), keys.waiting_asked(host))


@pytest.mark.redis
def test_waiting_episodes_take_shares_in_the_order_they_came(redis_client: redis.Redis) -> None:
    """A share given back goes to the first in line, not to whoever asks first after."""
    store = EpisodeStore(redis_client)
    host = "capacity-test-line"
    _clear(redis_client, host)
    budget = (2000, 8192)
    assert store.reserve(host, "ep_a", Share("w1", 1000, 512), budget=budget)
    assert store.reserve(host, "ep_b", Share("w2", 1000, 512), budget=budget)
    assert not store.reserve(host, "ep_c", Share("w3", 1000, 512), budget=budget)
    assert not store.reserve(host, "ep_d", Share("w4", 1000, 512), budget=budget)
    assert (store.ahead_in_line(host, "ep_c"), store.ahead_in_line(host, "ep_d")) == (0, 1)
    store.release(host, "ep_a")
    # ep_a's worker asks for its next episode at once: it stands behind the two waiting
    assert not store.reserve(host, "ep_e", Share("w1", 1000, 512), budget=budget)
    assert not store.reserve(host, "ep_d", Share("w4", 1000, 512), budget=budget)
    assert store.reserve(host, "ep_c", Share("w3", 1000, 512), budget=budget)
    assert store.ahead_in_line(host, "ep_c") is None  # out of the line once taken
    store.release(host, "ep_b")
    assert not store.reserve(host, "ep_e", Share("w1", 1000, 512), budget=budget)
    assert store.reserve(host, "ep_d", Share("w4", 1000, 512), budget=budget)
    assert store.ahead_in_line(host, "ep_e") == 0
    # the first in line holds the others back even when they would fit (no starving it)
    store.release(host, "ep_c")
    assert not store.reserve(host, "ep_f", Share("w3", 100, 64), budget=budget)
    assert not store.reserve(host, "ep_e", Share("w1", 1000, 7800), budget=budget)
    _clear(redis_client, host)


@pytest.mark.redis
def test_a_waiter_that_stops_asking_leaves_the_line(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    host = "capacity-test-left"
    _clear(redis_client, host)
    budget = (1000, 8192)
    assert store.reserve(host, "ep_a", Share("w1", 1000, 512), budget=budget)
    assert not store.reserve(host, "ep_gone", Share("w2", 1000, 512), budget=budget)  # dies
    assert not store.reserve(host, "ep_b", Share("w3", 1000, 512), budget=budget)
    store.release(host, "ep_a")
    assert not store.reserve(host, "ep_b", Share("w3", 1000, 512), budget=budget, left_s=60)
    time.sleep(0.3)
    assert store.reserve(host, "ep_b", Share("w3", 1000, 512), budget=budget, left_s=0.2)
    assert store.ahead_in_line(host, "ep_gone") is None
    # one that gives up waiting leaves at once
    assert not store.reserve(host, "ep_c", Share("w4", 1000, 512), budget=budget)
    store.leave_line(host, "ep_c")
    assert store.ahead_in_line(host, "ep_c") is None
    _clear(redis_client, host)


@pytest.mark.redis
def test_an_episode_that_waits_too_long_leaves_the_line(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client)
    settings = Settings(host_id="capacity-test-give-up")
    host = settings.host_id
    _clear(redis_client, host)
    budget = HostBudget(millicpus=1000, memory_mb=8192)
    assert store.reserve(host, "ep_a", Share("w1", 1000, 512), budget=budget.as_tuple())
    request = EpisodeCreate(task=TaskSpec(tests=TestSpec(files={})), solution=Solution())
    record = EpisodeRecord(
        id="ep_b", request=request, status=EpisodeStatus.queued, created=0.0, result=None
    )
    with pytest.raises(NoCapacity):
        reserve(store, record, settings=settings, budget=budget, worker="w2", wait_s=0.2)
    assert store.ahead_in_line(host, "ep_b") is None
    _clear(redis_client, host)


def test_auto_starts_what_the_budget_holds_at_the_default_size() -> None:
    assert HostBudget(millicpus=8000, memory_mb=24_000).processes() == 8  # 2 cores x 4
    assert HostBudget(millicpus=8000, memory_mb=1_300).processes() == 2  # 640 MiB each
    assert HostBudget(millicpus=500, memory_mb=24_000).processes() == 1
    assert HostBudget(millicpus=512_000, memory_mb=10**6).processes() == 64


# ------------------------------------------------------------------ verl's load case


@pytest.fixture(scope="module")
def service(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("capacity") / "service.log"
    # exactly WORKERS episodes of the default size (1 CPU) fit this host's budget
    oversubscribe = WORKERS / host_cpus()
    with (
        claimed_database() as redis_url,
        running_service(
            redis_url,
            log,
            PROCTOR_WORKER_CONCURRENCY=str(WORKERS),
            PROCTOR_CPU_OVERSUBSCRIBE=str(oversubscribe),
        ) as url,
    ):
        client = redis.Redis.from_url(redis_url)
        store = EpisodeStore(client)

        def all_ready() -> bool:
            live = store.live_workers(6)
            return len(live) >= WORKERS and not store.worker_problems(live)

        try:
            assert wait_until(all_ready, 180), "not every worker process came up"
            wait_for_warm_pools(redis_url)
            yield url
        finally:
            client.close()


def submit(url: str, body: dict[str, Any], out: dict[str, Any]) -> None:
    sent = time.monotonic()
    with httpx.Client(base_url=url, timeout=120) as client:
        response = client.post("/v1/episodes", params={"wait": 60}, json=body)
    out.update(response=response, sent=sent, done=time.monotonic())


@pytest.mark.docker
def test_correct_programs_answer_while_loops_hold_workers(service: str) -> None:
    loops = [episode(f"# loop {i}\nwhile True:\n    pass\n", timeout_s=LOOP_S) for i in range(6)]
    correct = [episode(f"# correct {i}\n{ADD}", timeout_s=LOOP_S) for i in range(2)]
    outcomes: list[dict[str, Any]] = [{} for _ in range(8)]
    threads = [
        threading.Thread(target=submit, args=(service, body, outcomes[i]))
        for i, body in enumerate(loops + correct)
    ]
    for thread in threads[:6]:
        thread.start()
    time.sleep(0.5)
    for thread in threads[6:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for i, outcome in enumerate(outcomes):
        result = outcome["response"].json()
        print(
            f"{'loop' if i < 6 else 'correct'} {i}: {outcome['done'] - outcome['sent']:.2f} s "
            f"verdict {result.get('verdict')} reward {result.get('reward')} "
            f"timings {result.get('timings')}"
        )
    loop_results = [o["response"].json() for o in outcomes[:6]]
    assert all(o["response"].status_code == 200 for o in outcomes)
    assert [r["verdict"] for r in loop_results] == ["timeout"] * 6, loop_results
    first_loop_end = min(o["done"] for o in outcomes[:6])
    for outcome in outcomes[6:]:
        result = outcome["response"].json()
        assert result["reward"] == 1.0 and result["verdict"] == "passed", result
        assert outcome["done"] - outcome["sent"] < LOOP_S
        assert outcome["done"] < first_loop_end
