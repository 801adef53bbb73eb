"""`Janitor`: the heartbeat and the sweep threads of a worker process, and the order of a
sweep's duties (each in a module of its own, see workers/janitor/__init__.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from redis.exceptions import RedisError

from core.defaults import (
    FORGET_WORKER_AFTER_S,
    IMAGE_CHECK_SWEEPS,
    INTERACTIVE_IDLE_S,
    JANITOR_STOP_S,
    MAX_EPISODE_S,
)
from core.store import EpisodeStore
from workers.janitor.containers import ContainerSweep
from workers.janitor.episodes import EpisodeEnds
from workers.janitor.heartbeat import Heartbeat
from workers.janitor.images import ImageCheck
from workers.janitor.processes import alive_here
from workers.janitor.shares import ShareReturns
from workers.sandbox.engine import Engine

log = logging.getLogger(__name__)


class IdlePool(Protocol):
    """Started sandboxes waiting for an episode (the warm pool, the pooled sandboxes)."""

    def drain_idle(self) -> object: ...


class Janitor:
    def __init__(
        self,
        store: EpisodeStore,
        *,
        worker: str,
        host: str,
        heartbeat_s: float,
        heartbeat_ttl_s: float,
        sweep_s: float,
        engine: Engine | None = None,
        pools: Sequence[IdlePool] = (),
        holding: dict[str, str] | None = None,
        busy: set[str] | None = None,
        images: Mapping[str, str] | None = None,
        idle_s: float = INTERACTIVE_IDLE_S,
        max_episode_s: float = MAX_EPISODE_S,
    ) -> None:
        self.store = store
        self.host = host
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.sweep_s = sweep_s
        self.pools = pools
        # episodes whose container this process holds: episode id → container id
        self.holding = holding if holding is not None else {}
        # episodes this process is running a job for right now
        self.busy = busy if busy is not None else set()
        self._sweeps = 0
        self.heartbeat = Heartbeat(
            store, worker=worker, host=host, every_s=heartbeat_s, ttl_s=heartbeat_ttl_s
        )
        self.episodes = EpisodeEnds(
            store,
            worker=worker,
            heartbeat_ttl_s=heartbeat_ttl_s,
            idle_s=idle_s,
            max_episode_s=max_episode_s,
            holding=self.holding,
            busy=self.busy,
        )
        self.shares = ShareReturns(
            store,
            worker=worker,
            host=host,
            heartbeat_ttl_s=heartbeat_ttl_s,
            holding=self.holding,
            busy=self.busy,
        )
        self.containers = (
            ContainerSweep(store, engine, worker=worker, host=host, holding=self.holding)
            if engine is not None
            else None
        )
        self.images = (
            ImageCheck(store, engine, worker=worker, images=images)
            if engine is not None and images
            else None
        )
        self._stop = threading.Event()
        # Two threads: a sweep can wait seconds on a busy Docker engine, and a heartbeat
        # held up behind it would make this worker look dead to the others.
        self._threads = [
            threading.Thread(
                target=self.heartbeat.beat_until, args=(self._stop,), name="heartbeat", daemon=True
            ),
            threading.Thread(target=self._sweep_loop, name="janitor", daemon=True),
        ]

    def start(self) -> None:
        self.heartbeat.first()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=JANITOR_STOP_S)

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self.sweep_s):
            try:
                self.sweep()
            except RedisError as exc:
                log.warning("janitor: Redis error: %s", exc)
            except Exception:
                log.exception("janitor: unexpected error")

    def sweep(self) -> None:
        self.store.forget_workers_older_than(FORGET_WORKER_AFTER_S)
        judging = self.heartbeat.judging()
        live = set(self.store.live_workers(self.heartbeat_ttl_s))
        live |= {
            w
            for w in self.store.dead_workers(self.heartbeat_ttl_s)
            if alive_here(w, host=self.host)
        }
        # one scan of the live episodes serves the three checks of this sweep
        summaries = self.store.live_summaries()
        if judging:
            self.episodes.end_abandoned(live, summaries)
            self.episodes.end_unstarted(live)
        self.episodes.end_lost(summaries)
        self.episodes.end_expired(summaries)
        if self.containers is not None:
            self.containers.release_ended()
            self.shares.release(judging=judging)
            self.containers.reap(live, others=judging)
            if self.images is not None and self._sweeps % IMAGE_CHECK_SWEEPS == 0:
                self.images.publish()
            self._sweeps += 1
        for pool in self.pools:
            pool.drain_idle()
