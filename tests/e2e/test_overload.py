"""The queue's wait bound as clients meet it over HTTP: a batch is admitted or refused whole
by when its first episode would start, a 429 says when to retry and the SDK waits that
long, and SandboxFusion's `/run_code` is held to its client's patience, then answered 504.

An API alone (no workers) on a database of its own: the drain rate is set in Redis as the
workers' ends would set it (`pace.gap`), and the queue drains where a test says so.
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
from core.defaults import MAX_SHUT_S
from proctor.client import Client, Overloaded
from proctor.models import EpisodeCreate, EpisodeStatus
from tests.conftest import claimed_database, running_api
from tests.e2e.helpers import episode

ADD = "def add(a, b):\n    return a + b\n"
GAP_S = 0.05  # the drain rate the tests set: 20 episodes a second


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[str, str]]:
    """An API with a wait bound of 2 s and no workers: its URL and its Redis's."""
    with (
        claimed_database() as redis_url,
        running_api(redis_url, PROCTOR_DEDUP_TTL_S="0", PROCTOR_MAX_QUEUE_WAIT_S="2") as url,
    ):
        yield url, redis_url


@pytest.fixture
def store(api: tuple[str, str]) -> Iterator[redis.Redis]:
    """The API's Redis, with an empty queue and a known drain rate; the door open."""
    with redis.Redis.from_url(api[1]) as client:
        client.delete(keys.QUEUED)
        client.hset(keys.PACE, "gap", str(GAP_S))
        time.sleep(MAX_SHUT_S)  # whatever an earlier test's refusal shut is open again
        yield client


def batch(url: str, size: int, **limits: Any) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/episodes/batch", json={"episodes": [episode(ADD, **limits)] * size}
    )


def test_a_batch_is_admitted_whole_into_a_short_queue_and_refused_whole_by_a_long_one(
    api: tuple[str, str], store: redis.Redis
) -> None:
    url, _ = api
    first = batch(url, 64)  # into an empty queue: its last would start in 3.2 s, past 2 s
    assert first.status_code == 202, first.text
    assert len(first.json()["ids"]) == 64 and store.zcard(keys.QUEUED) == 64

    refused = batch(url, 64)  # 64 ahead: its first would start in 3.2 s
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "2"  # 1.2 s until 2 s are left, rounded up
    assert "3.2 s of waiting before a new one starts" in refused.json()["error"]["message"]
    assert store.zcard(keys.QUEUED) == 64  # nothing of it was queued

    store.zpopmin(keys.QUEUED, 40)  # the queue drained to 24 ahead: 1.2 s
    time.sleep(MAX_SHUT_S)  # the refusal's door is open again
    second = batch(url, 64)
    assert second.status_code == 202, second.text
    assert store.zcard(keys.QUEUED) == 24 + 64


class DrainOnRefusal(httpx.HTTPTransport):
    """The real transport, which empties the queue the first time it sees a 429 (as if the
    workers had drained it meanwhile) and notes every answer's status."""

    def __init__(self, store: redis.Redis) -> None:
        super().__init__()
        self.store = store
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and response.status_code == 429 and 429 not in self.statuses:
            self.store.delete(keys.QUEUED)
        self.statuses.append(response.status_code)
        return response


def test_the_sdk_waits_out_a_429_for_as_long_as_retry_after_says(
    api: tuple[str, str], store: redis.Redis
) -> None:
    url, _ = api
    assert batch(url, 60).status_code == 202  # 3 s of waiting: a new one is refused
    request = EpisodeCreate.model_validate(episode(ADD))

    with Client(url) as client, pytest.raises(Overloaded) as refused:
        client.run(request, timeout_s=1)  # its Retry-After, 1 s, is not within it
    assert refused.value.retry_after == 1.0

    transport = DrainOnRefusal(store)
    with Client(url, transport=transport) as client:
        started = time.monotonic()
        result = client.run(request, timeout_s=4)
        elapsed = time.monotonic() - started
    # refused once, waited the second Retry-After asked, then admitted (and, with no
    # worker, still queued when the run's time was up)
    assert transport.statuses[:2] == [429, 202], transport.statuses
    assert elapsed >= 1.0
    assert result.status is EpisodeStatus.queued
    assert store.zscore(keys.QUEUED, result.id) is not None


def run_code(url: str) -> httpx.Response:
    """verl's request with 1 s timeouts: its client waits 1 + 1 + 10 s, answered 2 s early,
    so an episode may wait 10 - 1 (its run) - 0.4 * 10 (start and finish) = 5 s."""
    body = {"code": "print(1)\n", "language": "python", "compile_timeout": 1, "run_timeout": 1}
    return httpx.post(f"{url}/run_code", json=body, timeout=30)


def test_run_code_is_held_past_the_bound_and_answered_504_past_its_clients_patience(
    api: tuple[str, str], store: redis.Redis
) -> None:
    url, _ = api
    assert batch(url, 120).status_code == 202  # 6 s before a new one starts
    refused = run_code(url)
    assert refused.status_code == 504, refused.text  # verl's client retries a 504
    assert refused.headers["Retry-After"] == "2"  # 1 s and a little until 5 s are left
    assert store.zcard(keys.QUEUED) == 120

    store.zpopmin(keys.QUEUED, 50)  # 3.5 s: past the deployment's 2 s, within the client's 5
    assert batch(url, 1).status_code == 429  # the core API is refused: the door shuts
    answers: list[httpx.Response] = []
    held = threading.Thread(target=lambda: answers.append(run_code(url)))
    held.start()
    deadline = time.monotonic() + 10
    while store.zcard(keys.QUEUED) == 70 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.zcard(keys.QUEUED) == 71  # admitted, the door and the bound notwithstanding
    held.join(timeout=30)
    # no worker ran it: ended at its client's deadline as our failure, in its own format
    assert answers[0].status_code == 200
    assert answers[0].json()["status"] == "SandboxError"
