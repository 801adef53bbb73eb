"""Redis restarted under load — cleanly (SIGTERM) and by a crash (SIGKILL, back from its
append-only file) — with episodes queued and running: nothing acknowledged is lost, every
episode ends, and the workers and the API ride it out without being restarted."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import wait_until
from tests.faults.ledger import Ledger, Row
from tests.faults.stack import WORKERS, Stack, add_episode, submit

pytestmark = [pytest.mark.faults, pytest.mark.docker]

SLOW_S = 3  # the running episodes' tests: they end (and write to Redis) while it is down
OUTAGE_S = 6.0
DEADLINE_S = 60  # after Redis is back: reconnect, the running episodes, the queue
RESUBMIT_S = 20  # the API must take new episodes again this soon
CAPACITY_S = 15  # and every worker process is serving again (respawned, if it died)


def running(stack: Stack, ledger: Ledger) -> int:
    return sum(stack.episode_fields(i, "status")[0] == "running" for i in ledger.results)


@pytest.mark.parametrize("how", ["shutdown", "kill"], ids=["b-clean", "c-kill9-aof"])
def test_redis_restart_with_episodes_queued_and_running(
    how: str, make_stack: Callable[..., Stack], report: Callable[[Row], None]
) -> None:
    stack = make_stack()
    title = (
        "b. Redis restarted clean (SIGTERM)"
        if how == "shutdown"
        else "c. Redis kill -9, back from AOF"
    )
    row = Row(title)
    ledger = Ledger()
    started = time.monotonic()
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        for n in range(2):
            ledger.accept(submit(http, add_episode(n, sleep_s=SLOW_S)))
        for n in range(2, 12):
            ledger.accept(submit(http, add_episode(n)))
        # both children in the middle of an episode, the rest queued behind them
        if not wait_until(lambda: running(stack, ledger) >= 2, 45):
            assert running(stack, ledger) >= 1, "no episode started running"
        before = {i: stack.episode_fields(i, "status")[0] for i in ledger.results}
        row.extra["at_fault"] = {s: list(before.values()).count(s) for s in set(before.values())}

        stack.redis.shutdown() if how == "shutdown" else stack.redis.kill()
        time.sleep(OUTAGE_S)
        stack.redis.start()
        back_at = time.monotonic()

        # what was acknowledged is still there (the append-only file kept it)
        missing = [i for i in ledger.results if stack.episode_fields(i, "status")[0] is None]
        if missing:
            row.notes.append(f"{len(missing)} acknowledged episodes gone from Redis")
        # the API takes new work again, with the workers untouched
        after: list[str] = []
        try:
            after = [submit(http, add_episode(n), within_s=RESUBMIT_S) for n in range(100, 104)]
        except AssertionError as exc:
            row.notes.append(f"the API took no new episode after the restart: {exc}")
        for episode_id in after:
            ledger.accept(episode_id)
    why = ledger.collect(stack.url, deadline=back_at + DEADLINE_S, give_up=stack.workers_gone)
    if why:
        row.notes.append(why)
    ledger.fill(row)
    capacity = stack.full_capacity(CAPACITY_S)
    if not capacity:
        row.notes.append(
            f"only {len(stack.worker_children())} of {WORKERS} worker processes "
            "left, and nothing brought the others back"
        )
    row.recovered = (
        bool(after)
        and capacity
        and all((ledger.results[i] or {}).get("reward") == 1.0 for i in after)
    )
    row.seconds = round(time.monotonic() - started, 1)
    row.extra["logs"] = stack.logs()
    report(row)
    assert row.ok, row.summary()
