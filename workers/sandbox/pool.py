"""The warm pool: started, never-used containers, so an episode does not wait for one.

Pools are keyed by the full sandbox spec (image, limits, network): a container is made for
exactly one spec and used exactly once. A pool is created the first time its spec is
asked for, refilled in the background after every take, and drained when unused for a
while, so a run with unusual limits does not keep containers around forever.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from core.defaults import POOL_IDLE_DRAIN_S
from workers.sandbox.docker import POOL_LABEL, Container, Engine, SandboxError, SandboxSpec

log = logging.getLogger(__name__)


class WarmPool:
    def __init__(self, engine: Engine, *, size: int, threads: int = 2) -> None:
        self.engine = engine
        self.size = size
        self._ready: dict[SandboxSpec, deque[Container]] = {}
        self._pending: dict[SandboxSpec, int] = {}
        self._last_used: dict[SandboxSpec, float] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pool")
        self._closed = False

    def _name(self) -> str:
        return f"proctor-{uuid.uuid4().hex[:12]}"

    def acquire(self, spec: SandboxSpec) -> tuple[Container, bool]:
        """A container for `spec` and whether it came warm from the pool."""
        with self._lock:
            self._last_used[spec] = time.monotonic()
            ready = self._ready.get(spec)
            container = ready.popleft() if ready else None
        self._refill(spec)
        if container is not None:
            return container, True
        return self.engine.create(spec, name=self._name()), False

    def prewarm(self, spec: SandboxSpec) -> None:
        with self._lock:
            self._last_used[spec] = time.monotonic()
        self._refill(spec)

    def discard(self, container: Container) -> None:
        """Remove a used container without holding up the caller."""
        if self._closed:
            self.engine.remove(container.id)
        else:
            self._executor.submit(self.engine.remove, container.id)

    def _refill(self, spec: SandboxSpec) -> None:
        if self.size <= 0 or self._closed:
            return
        with self._lock:
            have = len(self._ready.get(spec, ())) + self._pending.get(spec, 0)
            missing = self.size - have
            self._pending[spec] = self._pending.get(spec, 0) + max(missing, 0)
        for _ in range(missing):
            self._executor.submit(self._make, spec)

    def _make(self, spec: SandboxSpec) -> None:
        try:
            container = self.engine.create(spec, name=self._name(), labels={POOL_LABEL: "1"})
        except SandboxError as exc:
            log.warning("warm pool: could not start a %s container: %s", spec.image, exc)
            return
        finally:
            with self._lock:
                self._pending[spec] -= 1
        with self._lock:
            if not self._closed:
                self._ready.setdefault(spec, deque()).append(container)
                return
        self.engine.remove(container.id)

    def drain_idle(self) -> None:
        """Remove the containers of specs nobody asked for lately."""
        now = time.monotonic()
        with self._lock:
            idle = [s for s, t in self._last_used.items() if now - t > POOL_IDLE_DRAIN_S]
            doomed = [c for s in idle for c in self._ready.pop(s, ())]
            for spec in idle:
                self._last_used.pop(spec, None)
        for container in doomed:
            self.discard(container)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            doomed = [c for q in self._ready.values() for c in q]
            self._ready.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for container in doomed:
            self.engine.remove(container.id)
