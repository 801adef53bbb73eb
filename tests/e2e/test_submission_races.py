"""Concurrent submissions: retries with one key share one episode, and the bound holds.

An API alone (no worker) so that nothing leaves the queue while the clients race.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis
from rq import Queue

from core.queues import QUEUE_NAME
from tests.conftest import claimed_database, free_port, service_env, stop, wait_ready
from tests.e2e.helpers import episode
from tests.e2e.test_recovery import start

BOUND = 50
CLIENTS = 16


@pytest.fixture
def lone_api() -> Iterator[tuple[str, redis.Redis]]:
    with claimed_database() as redis_url:
        port = free_port()
        api = start(["serve"], service_env(redis_url, port, PROCTOR_MAX_QUEUE_DEPTH=str(BOUND)))
        client = redis.Redis.from_url(redis_url)
        try:
            wait_ready(f"http://127.0.0.1:{port}", api, 60, path="/healthz")
            yield f"http://127.0.0.1:{port}", client
        finally:
            stop(api)
            client.close()


def episodes_stored(client: redis.Redis) -> int:
    return sum(1 for _ in client.scan_iter("proctor:episode:*"))


def jobs_queued(client: redis.Redis) -> int:
    return int(Queue(QUEUE_NAME, connection=client).count)


def test_retries_sent_at_once_share_one_episode(
    lone_api: tuple[str, redis.Redis],
) -> None:
    url, client = lone_api
    body = episode("def add(a, b):\n    return a + b\n")
    key = {"Idempotency-Key": "one-call"}

    def post(_: int) -> str:
        response = httpx.post(f"{url}/v1/episodes", json=body, headers=key, timeout=60)
        assert response.status_code == 202, response.text
        episode_id: str = response.json()["id"]
        return episode_id

    with ThreadPoolExecutor(20) as pool:
        ids = list(pool.map(post, range(20)))
    assert len(set(ids)) == 1, f"{len(set(ids))} episodes for 20 retries of one call"
    assert (episodes_stored(client), jobs_queued(client)) == (1, 1)

    # content dedup, asked for: a batch of 20 equal episodes is one
    other = {**episode("def add(a, b):\n    return b + a\n"), "share_identical": True}
    response = httpx.post(f"{url}/v1/episodes/batch", json={"episodes": [other] * 20}, timeout=60)
    assert response.status_code == 202, response.text
    batch_ids = response.json()["ids"]
    assert len(batch_ids) == 20 and len(set(batch_ids)) == 1
    assert batch_ids[0] not in ids
    assert (episodes_stored(client), jobs_queued(client)) == (2, 2)

    # and without a key or the ask, 5 equal episodes are 5 samples
    response = httpx.post(f"{url}/v1/episodes/batch", json={"episodes": [body] * 5}, timeout=60)
    assert len(set(response.json()["ids"])) == 5
    assert (episodes_stored(client), jobs_queued(client)) == (7, 7)


def test_concurrent_clients_never_overshoot_the_queue_bound(
    lone_api: tuple[str, redis.Redis],
) -> None:
    url, client = lone_api

    def client_run(n: int) -> list[int]:
        codes = []
        with httpx.Client(base_url=url, timeout=60) as http:
            for i in range(8):  # 16 x 8 = 128 distinct requests against a bound of 50
                body: dict[str, Any] = episode(f"def add(a, b):\n    return a + b  # {n}.{i}\n")
                codes.append(http.post("/v1/episodes", json=body).status_code)
        return codes

    with ThreadPoolExecutor(CLIENTS) as pool:
        codes = [c for batch in pool.map(client_run, range(CLIENTS)) for c in batch]
    assert set(codes) <= {202, 429}, codes
    accepted = codes.count(202)
    assert accepted == BOUND, f"{accepted} accepted against a bound of {BOUND}"
    assert (episodes_stored(client), jobs_queued(client)) == (BOUND, BOUND)
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert f"proctor_queue_depth {float(BOUND)}" in metrics
