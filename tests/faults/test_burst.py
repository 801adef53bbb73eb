"""A burst far above the queue bound: the excess is a 429 with Retry-After, the queue
never holds more than the bound, and every accepted episode ends with its reward."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis

from tests.faults.ledger import Ledger, Row
from tests.faults.stack import QUEUE_KEY, Stack, add_episode, submit

pytestmark = [pytest.mark.faults, pytest.mark.docker]

BOUND = 20
REQUESTS = 200
CLIENTS = 16
DEADLINE_S = 90  # the accepted episodes, two at a time on a shared host
ACTIVE_KEY = "proctor:active"


class DepthMonitor(threading.Thread):
    """The most episodes ever waiting: the RQ queue's length, and records still `queued`."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.client = stack.client()
        self.max_jobs = 0
        self.max_queued = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.max_jobs = max(self.max_jobs, int(self.client.llen(QUEUE_KEY)))
                ids = self.client.zrange(ACTIVE_KEY, 0, -1)
                pipe = self.client.pipeline(transaction=False)
                for episode_id in ids:
                    pipe.hget(
                        "proctor:episode:" + str(episode_id), "status"
                    )  # str already (decode_responses)
                queued = sum(1 for s in pipe.execute() if s == "queued")
                self.max_queued = max(self.max_queued, queued)
            except redis.RedisError:
                pass
            time.sleep(0.005)
        self.client.close()


def test_burst_far_above_the_queue_bound(
    make_stack: Callable[..., Stack], report: Callable[[Row], None]
) -> None:
    stack = make_stack(PROCTOR_MAX_QUEUE_DEPTH=str(BOUND))
    row = Row(f"e. burst {REQUESTS} reqs / {CLIENTS} clients, bound {BOUND}")
    ledger = Ledger()
    started = time.monotonic()
    monitor = DepthMonitor(stack)
    monitor.start()
    local = threading.local()
    clients: list[httpx.Client] = []

    def post(n: int) -> tuple[int, str | None, dict[str, Any] | str]:
        if not hasattr(local, "http"):  # one connection per client thread, as trainers keep
            local.http = httpx.Client(base_url=stack.url, timeout=30)
            clients.append(local.http)
        try:
            response = local.http.post("/v1/episodes", json=add_episode(n))
        except httpx.TransportError as exc:
            return 0, None, str(exc)
        try:
            body: dict[str, Any] | str = response.json()
        except ValueError:
            body = response.text
        return response.status_code, response.headers.get("Retry-After"), body

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(post, range(REQUESTS)))
    for client in clients:
        client.close()
    monitor.done.set()
    monitor.join()
    statuses = Counter(status for status, _, _ in answers)
    row.extra["answers"] = {str(k): v for k, v in sorted(statuses.items())}
    row.extra["max_queue_jobs"] = monitor.max_jobs
    row.extra["max_queued_episodes"] = monitor.max_queued
    for status, _, body in answers:
        if status in (200, 202) and isinstance(body, dict):
            ledger.accept(str(body["id"]))
    refused = [(s, retry) for s, retry, _ in answers if s == 429]
    without_retry_after = sum(1 for _, retry in refused if not retry)
    unexpected = sum(v for k, v in statuses.items() if k not in (200, 202, 429))
    if not refused:
        row.notes.append("nothing was refused: the bound never bit")
    if without_retry_after:
        row.notes.append(f"{without_retry_after} 429s without Retry-After")
    if unexpected:
        row.notes.append(f"{unexpected} answers neither accepted nor 429")
    overshoot = max(monitor.max_jobs, monitor.max_queued) - BOUND
    if overshoot > 0:
        row.notes.append(f"the queue held {BOUND + overshoot} against a bound of {BOUND}")

    why = ledger.collect(
        stack.url, deadline=time.monotonic() + DEADLINE_S, give_up=stack.workers_gone
    )
    if why:
        row.notes.append(why)
    # once drained, the service takes work again
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        again = submit(http, add_episode(REQUESTS + 1))
    ledger.accept(again)
    ledger.collect(stack.url, deadline=time.monotonic() + 30, give_up=stack.workers_gone)
    ledger.fill(row)
    row.recovered = (ledger.results[again] or {}).get("reward") == 1.0
    row.seconds = round(time.monotonic() - started, 1)
    row.extra["logs"] = stack.logs()
    report(row)
    assert row.ok and refused and not without_retry_after and not unexpected and overshoot <= 0, (
        row.summary()
    )
