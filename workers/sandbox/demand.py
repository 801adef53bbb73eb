"""How many started sandboxes a worker process keeps idle: as many as recent demand for
each spec needs, within a floor and a ceiling that are the host's, shared out among its
worker processes.

A pool that kept `size` idle sandboxes for every spec ever asked for, in every worker
process and in each of its pools, held 265 idle containers on a 2-core host after a
morning of mixed traffic (images by limits by processes by pools), ~10 % of a core at rest.
Now a spec keeps what its takes of the last `window_s` need while one sandbox starts
(Little's law: the rate of takes times the start time, and at least one while it is asked
for at all), the prewarmed specs keep the floor, and no process starts one past its share
of the host's ceiling.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable

from core.defaults import POOL_DEMAND_WINDOW_S, POOL_START_GUESS_S


def share(total: int, processes: int, index: int) -> int:
    """Process `index`'s part of a host's `total` among `processes`: the parts add up."""
    processes = max(processes, 1)
    return total // processes + (1 if index % processes < total % processes else 0)


class Budget:
    """The idle and starting sandboxes one worker process may hold, all its pools together."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.held = 0
        self._lock = threading.Lock()

    def reserve(self) -> bool:
        """Count one more if there is room; False (nothing counted) when there is none."""
        with self._lock:
            if self.held >= self.ceiling:
                return False
            self.held += 1
            return True

    def count_back(self) -> None:
        """Count one that is running already (a pooled sandbox back from its episode), past
        the ceiling if need be: the ceiling bounds what is started, and throwing a running
        sandbox away to start another in its place costs a start for nothing."""
        with self._lock:
            self.held += 1

    def release(self, n: int = 1) -> None:
        with self._lock:
            self.held = max(self.held - n, 0)


class Demand:
    """The takes of each spec in the last `window_s`, and how long one start takes."""

    def __init__(
        self,
        *,
        floor: int = 0,
        window_s: float = POOL_DEMAND_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.floor = floor
        self.window_s = window_s
        self.clock = clock
        self.start_s = POOL_START_GUESS_S  # a moving mean of the starts measured
        self._takes: dict[Hashable, deque[float]] = {}
        self._floored: set[Hashable] = set()
        self._lock = threading.Lock()

    def keep_floor(self, key: Hashable) -> None:
        """`key` is a prewarmed spec: it keeps the floor without demand."""
        with self._lock:
            self._floored.add(key)

    def took(self, key: Hashable) -> None:
        with self._lock:
            self._takes.setdefault(key, deque()).append(self.clock())

    def started(self, seconds: float) -> None:
        with self._lock:
            self.start_s += (seconds - self.start_s) * 0.2

    def quiet(self, key: Hashable, seconds: float) -> bool:
        """Whether `key` was not taken in the last `seconds`."""
        with self._lock:
            takes = self._takes.get(key)
            return not takes or self.clock() - takes[-1] >= seconds

    def target(self, key: Hashable, cap: int) -> int:
        """Idle sandboxes `key` should have now, at most `cap`."""
        with self._lock:
            takes = self._takes.get(key)
            horizon = self.clock() - self.window_s
            while takes and takes[0] < horizon:
                takes.popleft()
            n = len(takes) if takes else 0
            if takes is not None and not takes:
                del self._takes[key]
            want = max(math.ceil(n / self.window_s * self.start_s), 1) if n else 0
            if key in self._floored:
                want = max(want, self.floor)
        return min(want, cap)
