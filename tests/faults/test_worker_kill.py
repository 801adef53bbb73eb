"""A worker child SIGKILLed mid-episode: its episode still ends (1.0 or null, never 0.0),
the queue behind it drains, and the lost child is replaced without anyone restarting
the workers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import wait_until
from tests.faults.ledger import Ledger, Row
from tests.faults.stack import WORKERS, Stack, add_episode, submit

pytestmark = [pytest.mark.faults, pytest.mark.docker]

DEADLINE_S = 45  # heartbeat TTL (6 s) + sweeps + the queue: far more than enough
RESPAWN_S = 20


def running_workers(stack: Stack, ledger: Ledger) -> list[str]:
    names = []
    for episode_id in ledger.results:
        status, worker = stack.episode_fields(episode_id, "status", "worker")
        if status == "running" and worker:
            names.append(worker)
    return names


def latest_started(workers: list[str]) -> str:
    """The child started last: the one `join()` does not wait on first (the hard case)."""

    def started(name: str) -> tuple[int, int]:
        _host, pid, ticks, _ = name.rsplit(".", 3)
        return int(ticks), int(pid)

    return max(workers, key=started)


def test_worker_child_sigkilled_mid_episode(
    make_stack: Callable[..., Stack], report: Callable[[Row], None]
) -> None:
    stack = make_stack()
    row = Row("a. worker child SIGKILL")
    ledger = Ledger()
    started = time.monotonic()
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        # two slow episodes keep both children busy; six fast ones queue behind them
        for n in range(2):
            ledger.accept(submit(http, add_episode(n, sleep_s=5)))
        for n in range(2, 8):
            ledger.accept(submit(http, add_episode(n)))
        assert wait_until(
            lambda: len(running_workers(stack, ledger)) >= WORKERS, 45
        ) or running_workers(stack, ledger), "no episode started running"
        victim = latest_started(running_workers(stack, ledger))
        pid = int(victim.rsplit(".", 3)[1])
        assert pid in stack.worker_children(), f"{victim} is not a child of our workers"
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        row.notes.append(f"killed child {pid} while it ran an episode")

        # capacity comes back: a new child heartbeats besides the survivor
        respawned = stack.full_capacity(RESPAWN_S)
        row.extra["respawned_s"] = round(time.monotonic() - killed_at, 1) if respawned else None
        if not respawned:
            row.notes.append(
                f"no replacement child within {RESPAWN_S}s "
                f"({len(stack.worker_children())} of {WORKERS} serving)"
            )
        after = [submit(http, add_episode(n)) for n in range(100, 104)]
        for episode_id in after:
            ledger.accept(episode_id)
    why = ledger.collect(stack.url, deadline=killed_at + DEADLINE_S, give_up=stack.workers_gone)
    if why:
        row.notes.append(why)
    ledger.fill(row)
    row.recovered = respawned and all((ledger.results[i] or {}).get("reward") == 1.0 for i in after)
    row.seconds = round(time.monotonic() - started, 1)
    row.extra["logs"] = stack.logs()
    report(row)
    assert row.ok, row.summary()
