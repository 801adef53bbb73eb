"""Pools of started sandboxes, keyed by spec, so an episode does not wait for one.

Pools are keyed by the full sandbox spec (image, limits, network, isolation): a sandbox is
made for exactly one spec. A pool is created the first time its spec is asked for, refilled
in the background after every take, and drained when unused for a while, so a run with
unusual limits does not keep sandboxes around forever.

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
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from core.defaults import POOL_IDLE_DRAIN_S
from workers.sandbox.engine import POOL_LABEL, Container, Engine, SandboxError, SandboxSpec

log = logging.getLogger(__name__)

T = TypeVar("T")


class StartedPool(Generic[T]):
    """Up to `size` idle started sandboxes per spec, made by `_start`, ended by `_remove`."""

    what = "sandbox"  # for the log

    def __init__(self, engine: Engine, *, size: int, threads: int = 2) -> None:
        self.engine = engine
        self.size = size
        self._idle: dict[SandboxSpec, deque[T]] = {}
        self._pending: dict[SandboxSpec, int] = {}
        self._last_used: dict[SandboxSpec, float] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pool")
        self._closed = False

    def _start(self, spec: SandboxSpec) -> T:
        raise NotImplementedError

    def _remove(self, item: T) -> None:
        raise NotImplementedError

    def _take(self, spec: SandboxSpec) -> T | None:
        """An idle one for `spec` (None when there is none), and a refill started."""
        with self._lock:
            self._last_used[spec] = time.monotonic()
            idle = self._idle.get(spec)
            item = idle.popleft() if idle else None
        self._refill(spec)
        return item

    def _keep(self, spec: SandboxSpec, item: T) -> bool:
        """Make `item` idle again; False (and nothing done) once the pool is closed."""
        with self._lock:
            if self._closed:
                return False
            self._idle.setdefault(spec, deque()).append(item)
            return True

    def _discard(self, item: T) -> None:
        """Remove one without holding up the caller."""
        if self._closed:
            self._remove(item)
        else:
            self._executor.submit(self._remove, item)

    def prewarm(self, spec: SandboxSpec) -> None:
        with self._lock:
            self._last_used[spec] = time.monotonic()
        self._refill(spec)

    def drain_idle(self, idle_s: float = POOL_IDLE_DRAIN_S) -> int:
        """Remove the idle ones of specs nobody asked for in `idle_s`; how many went."""
        now = time.monotonic()
        with self._lock:
            stale = [s for s, t in self._last_used.items() if now - t > idle_s]
            drained = [item for s in stale for item in self._idle.pop(s, ())]
            for spec in stale:
                self._last_used.pop(spec, None)
        for item in drained:
            self._discard(item)
        return len(drained)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [item for queue in self._idle.values() for item in queue]
            self._idle.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for item in idle:
            self._remove(item)

    def _refill(self, spec: SandboxSpec) -> None:
        if self.size <= 0 or self._closed:
            return
        with self._lock:
            missing = self.size - len(self._idle.get(spec, ())) - self._pending.get(spec, 0)
            self._pending[spec] = self._pending.get(spec, 0) + max(missing, 0)
        for _ in range(missing):
            self._executor.submit(self._make, spec)

    def _make(self, spec: SandboxSpec) -> None:
        try:
            item = self._start(spec)
        except SandboxError as exc:
            log.warning("%s pool: could not start one from %s: %s", self.what, spec.image, exc)
            return
        finally:
            with self._lock:
                self._pending[spec] -= 1
        if not self._keep(spec, item):
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
