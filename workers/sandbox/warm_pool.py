"""Pools of started sandboxes, keyed by spec, so an episode does not wait for one.

Pools are keyed by the full sandbox spec (image, limits, network, isolation): a sandbox is
made for exactly one spec. A pool is created the first time its spec is asked for, refilled
in the background after every take to what recent demand for the spec needs, and trimmed
back to that as demand falls (workers/sandbox/demand.py), so a run with unusual limits does
not keep sandboxes around; a worker process's pools together stay within its share of the
host's ceiling.

`StartedPool` is that mechanism; `WarmPool` holds fresh containers, each used once, and
`server_sandboxes.RunnerPool` holds sandboxes whose root server runs the episodes (a
pooled one serves many episodes, a one-shot server one).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from core.defaults import POOL_IDLE_DRAIN_S, POOL_TRIM_QUIET_S
from workers.sandbox.demand import Budget, Demand
from workers.sandbox.engine import POOL_LABEL, Container, Engine, SandboxError, SandboxSpec

log = logging.getLogger(__name__)

T = TypeVar("T")


class StartedPool(Generic[T]):
    """Idle started sandboxes per spec, as many as its recent demand needs (at most `size`),
    made by `_start`, ended by `_remove`; `budget` (shared by a process's pools) bounds
    them all, `floor` is kept for the prewarmed specs."""

    what = "sandbox"  # for the log

    def __init__(
        self,
        engine: Engine,
        *,
        size: int,
        threads: int = 2,
        budget: Budget | None = None,
        floor: int = 1,
    ) -> None:
        self.engine = engine
        self.size = size
        self.budget = budget or Budget(ceiling=1 << 30)
        self.demand = Demand(floor=floor)
        self._idle: dict[SandboxSpec, deque[T]] = {}
        self._pending: dict[SandboxSpec, int] = {}
        self._last_used: dict[SandboxSpec, float] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pool")
        self._closed = False
        self._starts: set[Future[None]] = set()

    def _start(self, spec: SandboxSpec) -> T:
        raise NotImplementedError

    def _remove(self, item: T) -> None:
        raise NotImplementedError

    def _take(self, spec: SandboxSpec) -> T | None:
        """An idle one for `spec` (None when there is none), and a refill started."""
        self.demand.took(spec)
        with self._lock:
            self._last_used[spec] = time.monotonic()
            idle = self._idle.get(spec)
            item = idle.popleft() if idle else None
        if item is not None:
            self.budget.release()
        self._refill(spec)
        return item

    def _keep(self, spec: SandboxSpec, item: T, *, counted: bool = False) -> bool:
        """Make `item` idle again; False (and nothing done) once the pool is closed.
        `counted`: the budget holds it already (it was reserved when it was started); else
        it is counted back even past the ceiling (`Budget.count_back`), and a surplus is
        trimmed once its spec's demand has quieted (`drain_idle`)."""
        if not counted:
            self.budget.count_back()
        with self._lock:
            if not self._closed:
                self._idle.setdefault(spec, deque()).append(item)
                return True
        self.budget.release()
        return False

    def _discard(self, item: T) -> None:
        """Remove one without holding up the caller."""
        if self._closed:
            self._remove(item)
        else:
            self._executor.submit(self._remove, item)

    def prewarm(self, spec: SandboxSpec) -> None:
        """Keep the floor of `spec` started, asked for or not."""
        self.demand.keep_floor(spec)
        with self._lock:
            self._last_used[spec] = time.monotonic()
        self._refill(spec)

    def drain_idle(self, idle_s: float = POOL_IDLE_DRAIN_S) -> int:
        """Remove the idle ones past what their spec's recent demand needs, and all of the
        specs nobody asked for in `idle_s`; how many went."""
        now = time.monotonic()
        drained: list[T] = []
        with self._lock:
            stale = [s for s, t in self._last_used.items() if now - t > idle_s]
            for spec in stale:
                drained += self._idle.pop(spec, ())
                self._last_used.pop(spec, None)
            quiet = [
                (spec, idle)
                for spec, idle in self._idle.items()
                # in use: its sandboxes come back between episodes
                if self.demand.quiet(spec, POOL_TRIM_QUIET_S)
            ]
            for spec, idle in quiet:
                surplus = len(idle) - self.demand.target(spec, self.size)
                drained += [idle.popleft() for _ in range(max(surplus, 0))]
            # what came back past the ceiling leaves once its spec is quiet
            over = self.budget.held - len(drained) - self.budget.ceiling
            for _, idle in quiet:
                while over > 0 and idle:
                    drained.append(idle.popleft())
                    over -= 1
        self.budget.release(len(drained))
        for item in drained:
            self._discard(item)
        return len(drained)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [item for queue in self._idle.values() for item in queue]
            self._idle.clear()
        self.budget.release(len(idle))
        # starts not begun are cancelled; removals handed to the threads still run (cancelled,
        # their containers would outlive the worker)
        for future in list(self._starts):
            future.cancel()
        self._executor.shutdown(wait=True)
        for item in idle:
            self._remove(item)

    def _refill(self, spec: SandboxSpec) -> None:
        if self.size <= 0 or self._closed:
            return
        target = self.demand.target(spec, self.size)
        with self._lock:
            missing = target - len(self._idle.get(spec, ())) - self._pending.get(spec, 0)
            missing = sum(1 for _ in range(max(missing, 0)) if self.budget.reserve())
            self._pending[spec] = self._pending.get(spec, 0) + missing
        for _ in range(missing):
            future = self._executor.submit(self._make, spec)
            self._starts.add(future)
            future.add_done_callback(self._starts.discard)

    def _make(self, spec: SandboxSpec) -> None:
        started = time.monotonic()
        try:
            item = self._start(spec)
        except SandboxError as exc:
            self.budget.release()
            log.warning("%s pool: could not start one from %s: %s", self.what, spec.image, exc)
            return
        finally:
            with self._lock:
                self._pending[spec] -= 1
        self.demand.started(time.monotonic() - started)
        if not self._keep(spec, item, counted=True):
            self.budget.release()
            self._remove(item)


class WarmPool(StartedPool[Container]):
    """Started, never-used containers: each serves one episode, then is removed."""

    what = "warm"

    def acquire(self, spec: SandboxSpec) -> tuple[Container, bool]:
        """A container for `spec` and whether it came warm from the pool."""
        container = self._take(spec)
        if container is not None:
            return container, True
        return self.engine.create(spec, name=_name()), False

    def discard(self, container: Container) -> None:
        """Remove a used container without holding up the caller."""
        self._discard(container)

    def _start(self, spec: SandboxSpec) -> Container:
        return self.engine.create(spec, name=_name(), labels={POOL_LABEL: "1"})

    def _remove(self, item: Container) -> None:
        self.engine.remove(item.id)


def _name() -> str:
    return f"proctor-{uuid.uuid4().hex[:12]}"
