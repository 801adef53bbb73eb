"""Keeping a host's worker processes alive: reap each one the moment it dies, start another.

A child is reaped as soon as it exits (a wait on every child's sentinel, not `join()` in
order: an unreaped child is a zombie that still looks alive by its PID and start time), its
name is taken off the worker registry at once (so the janitors end its episodes without
waiting for its heartbeat to age), the shares of the host's budget it held are given back
(workers/capacity.py), and a new child takes its place — at once if it had run
a while, after a doubling delay if it keeps dying as it starts (Docker down, a bad image).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

import redis

from core.config import Settings
from core.defaults import (
    RESPAWN_FIRST_S,
    RESPAWN_LONGEST_S,
    SETTLED_S,
    SUPERVISOR_REDIS_TIMEOUT_S,
)
from core.store import EpisodeStore
from workers.janitor import worker_name

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Slot:
    index: int
    process: BaseProcess | None = None
    name: str | None = None  # the child's worker name (what it heartbeats as)
    started: float = 0.0
    quick_deaths: int = 0  # deaths in a row, each before SETTLED_S
    start_at: float = 0.0  # when the next child may start


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        count: int,
        *,
        burst: bool,
        target: Callable[..., None],
    ) -> None:
        self.settings = settings
        self.burst = burst
        self.target = target
        self.slots = [Slot(i) for i in range(count)]
        self.stopping = False
        self._context = multiprocessing.get_context("spawn")
        self._store: EpisodeStore | None = None
        self.exit_codes: list[int] = []

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)
        for slot in self.slots:
            self._start(slot)
        while any(s.process is not None for s in self.slots) or self._pending():
            running = {s.process.sentinel: s for s in self.slots if s.process is not None}
            for sentinel in wait(list(running), timeout=self._next_start_in()):
                self._reap(running[sentinel])  # type: ignore[index]
            now = time.monotonic()
            for slot in self.slots:
                if (
                    slot.process is None
                    and not self.stopping
                    and slot.start_at <= now
                    and slot.start_at > 0
                ):
                    self._start(slot)
        return max(self.exit_codes, default=0)

    def _pending(self) -> bool:
        return not self.stopping and any(s.process is None and s.start_at > 0 for s in self.slots)

    def _next_start_in(self) -> float | None:
        waits = [
            s.start_at - time.monotonic()
            for s in self.slots
            if s.process is None and s.start_at > 0 and not self.stopping
        ]
        return max(min(waits), 0.0) if waits else None

    def _start(self, slot: Slot) -> None:
        suffix = uuid.uuid4().hex[:4]
        process = self._context.Process(
            target=self.target,
            args=(self.settings,),
            kwargs={
                "burst": self.burst,
                "child": True,
                "suffix": suffix,
                "slot": (slot.index, len(self.slots)),
            },
            name=f"worker-{slot.index}",
        )
        process.start()
        assert process.pid is not None
        slot.process, slot.started, slot.start_at = process, time.monotonic(), 0.0
        # read now, while the child exists: its start time is half of its name
        slot.name = worker_name(self.settings.host_id, pid=process.pid, suffix=suffix)

    def _reap(self, slot: Slot) -> None:
        process = slot.process
        assert process is not None
        process.join()
        code = process.exitcode if process.exitcode is not None else 1
        slot.process = None
        self.exit_codes.append(code)
        lived = time.monotonic() - slot.started
        if self.stopping or (self.burst and code == 0):
            return
        self._forget(slot)
        slot.quick_deaths = slot.quick_deaths + 1 if lived < SETTLED_S else 0
        delay = (
            0.0
            if slot.quick_deaths == 0
            else min(RESPAWN_FIRST_S * 2 ** (slot.quick_deaths - 1), RESPAWN_LONGEST_S)
        )
        log.error(
            "worker %s (pid %s) died with %s after %.0f s; a new one starts in %.0f s",
            slot.name,
            process.pid,
            code,
            lived,
            delay,
        )
        slot.start_at = time.monotonic() + max(delay, 0.001)

    def _forget(self, slot: Slot) -> None:
        """Off the registry now: its episodes end at the next sweep, not a TTL later, and
        its shares of the host's budget are free for the others at once."""
        if slot.name is None:
            return
        try:
            if self._store is None:
                client = redis.Redis.from_url(
                    self.settings.redis_url,
                    socket_timeout=SUPERVISOR_REDIS_TIMEOUT_S,
                    socket_connect_timeout=SUPERVISOR_REDIS_TIMEOUT_S,
                )
                self._store = EpisodeStore(client, result_ttl_s=self.settings.result_ttl_s)
            self._store.forget_worker(slot.name)
            self._store.release_of(self.settings.host_id, slot.name)
        except redis.RedisError as exc:  # its heartbeat ages instead
            log.warning("could not take worker %s off the registry: %s", slot.name, exc)

    def _forward(self, signum: int, _frame: object) -> None:
        self.stopping = True
        for slot in self.slots:
            process = slot.process
            if process is not None and process.pid is not None and process.exitcode is None:
                with suppress(ProcessLookupError):  # died just now; the loop reaps it
                    os.kill(process.pid, signum)
