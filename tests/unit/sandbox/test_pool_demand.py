"""Pools sized by recent demand, within a process's share of the host's floor and ceiling:
the pool mechanism itself (`StartedPool`), its sandboxes plain tokens here (the same pools
start real containers in tests/integration/test_warm_pools.py)."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import Any

import pytest

from workers.sandbox.demand import Budget, Demand, share
from workers.sandbox.engine import SandboxSpec
from workers.sandbox.warm_pool import StartedPool

SPEC = SandboxSpec(image="proctor/sandbox-python:latest", memory_mb=512, cpus=1.0)


class Tokens(StartedPool[int]):
    """A pool whose sandboxes are numbers: what it starts and removes is counted."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(None, **kwargs)  # type: ignore[arg-type]
        self.counter = itertools.count()
        self.live: set[int] = set()

    def _start(self, spec: SandboxSpec) -> int:
        item = next(self.counter)
        self.live.add(item)
        return item

    def _remove(self, item: int) -> None:
        self.live.remove(item)

    def settle(self) -> None:
        deadline = time.monotonic() + 10
        while any(self._pending.values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(self._pending.values())

    def idle(self) -> int:
        return sum(len(q) for q in self._idle.values())


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("total", "processes"), [(16, 3), (1, 4), (0, 2), (5, 5), (7, 1)])
def test_the_shares_add_up_to_the_host(total: int, processes: int) -> None:
    parts = [share(total, processes, i) for i in range(processes)]
    assert sum(parts) == total and max(parts) - min(parts) <= 1


def test_many_specs_stay_within_the_ceiling() -> None:
    """Mixed traffic (a spec per limit) once held `size` idle of every spec ever asked for."""
    budget = Budget(3)
    warm, served = Tokens(size=2, budget=budget), Tokens(size=2, budget=budget)
    for memory in range(256, 256 + 10 * 64, 64):
        spec = replace(SPEC, memory_mb=memory)
        for pool in (warm, served):
            taken = pool._take(spec)
            assert taken is None  # never asked for before: nothing idle
            pool.settle()
    assert warm.idle() + served.idle() <= 3
    assert budget.held == warm.idle() + served.idle() == len(warm.live) + len(served.live)
    warm.close()
    served.close()
    assert budget.held == 0 and not warm.live and not served.live


def test_demand_is_the_rate_of_takes_times_a_start() -> None:
    clock = Clock()
    demand = Demand(floor=2, window_s=60, clock=clock)
    demand.start_s = 30.0  # slow starts: a steady rate needs several idle
    assert demand.target("a", cap=8) == 0  # never asked for
    for _ in range(6):  # 6 takes a minute, starts of 30 s: 3 idle keep up
        demand.took("a")
        clock.now += 5
    assert demand.target("a", cap=8) == 3
    assert demand.target("a", cap=2) == 2
    demand.start_s = 0.5
    assert demand.target("a", cap=8) == 1  # asked for at all: one
    clock.now += 60
    assert demand.target("a", cap=8) == 0  # not for a window: none
    demand.keep_floor("a")
    assert demand.target("a", cap=8) == 2


def test_idle_sandboxes_follow_demand_down_to_the_floor() -> None:
    clock = Clock()
    pool = Tokens(size=4, floor=1)
    pool.demand = Demand(floor=1, window_s=60, clock=clock)
    prewarmed = SPEC
    pool.prewarm(prewarmed)
    pool.settle()
    assert pool.idle() == 1  # the floor, asked for or not
    others = [replace(SPEC, memory_mb=m) for m in (1024, 2048, 4096)]
    for spec in others:
        pool._take(spec)
        pool.settle()
    assert [len(pool._idle[s]) for s in others] == [1, 1, 1]  # asked for: one each

    clock.now += 61  # no demand for a window: trimmed to nothing, the floor stays
    assert pool.drain_idle() == 3
    assert pool.idle() == 1 and len(pool._idle[prewarmed]) == 1
    assert pool.budget.held == 1
    pool.close()  # waits for the removals handed to its threads
    assert not pool.live and pool.budget.held == 0


def test_a_process_with_no_share_keeps_nothing_idle() -> None:
    pool = Tokens(size=2, budget=Budget(0), floor=0)
    pool.prewarm(SPEC)
    assert pool._take(SPEC) is None
    pool.settle()
    assert pool.idle() == 0 and not pool.live


def test_a_sandbox_back_from_its_episode_is_kept_past_the_ceiling() -> None:
    """A pooled sandbox comes back after each episode: thrown away because refills had
    taken the budget meanwhile, each was replaced by a fresh start (a start an episode
    under load). It is counted back instead, and its surplus waits for demand to quiet."""
    clock = Clock()
    pool = Tokens(size=1, budget=Budget(1), floor=0)
    pool.demand = Demand(floor=0, window_s=60, clock=clock)
    in_use = [pool._take(SPEC) for _ in range(3)]  # three episodes at once, as acquire
    in_use = [pool._start(SPEC) if item is None else item for item in in_use]
    pool.settle()  # the refill took the whole budget
    for item in in_use:
        assert pool._keep(SPEC, item)
    assert pool.idle() == 4 and pool.budget.held == 4
    assert pool.drain_idle() == 0  # still being taken: nothing trimmed
    clock.now += 11
    assert pool.drain_idle() == 3  # quiet: down to what demand needs
    pool.close()
    assert not pool.live and pool.budget.held == 0
