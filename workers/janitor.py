"""Keeping the books straight: heartbeats, abandoned episodes, orphaned containers.

Runs as a thread in every worker process. Every episode must end, also when the worker
running it dies: an episode whose worker has stopped sending heartbeats is ended as
`failed`/`infra_error` with no reward. It is not retried: the solution may be what killed
the worker (a poison pill), and trainers retry on their own terms; a null reward tells
them to drop the sample. Containers whose worker is gone are removed by label.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from redis.exceptions import RedisError

from proctor.models import EpisodeResult, EpisodeStatus, Verdict
from service.store import EpisodeStore
from workers.sandbox.docker import WORKER_LABEL, Engine, SandboxError
from workers.sandbox.pool import WarmPool

log = logging.getLogger(__name__)

FORGET_AFTER_S = 24 * 3600  # a worker silent this long is dropped from the registry


def process_start_ticks(pid: int) -> str:
    """When a process started (clock ticks since boot): with its PID, who it is."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def worker_name(host_id: str) -> str:
    """`host.pid.start.random`: a restarted container may reuse the PID, never the start."""
    pid = os.getpid()
    return f"{host_id}.{pid}.{process_start_ticks(pid)}.{uuid.uuid4().hex[:4]}"


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
        pool: WarmPool | None = None,
        holding: dict[str, str] | None = None,
        idle_s: float = 300.0,
        max_episode_s: float = 3600.0,
    ) -> None:
        self.store = store
        self.worker = worker
        self.host = host
        self.heartbeat_s = heartbeat_s
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.sweep_s = sweep_s
        self.engine = engine
        self.pool = pool
        # episodes whose container this process holds: episode id → container id
        self.holding = holding if holding is not None else {}
        self.idle_s = idle_s
        self.max_episode_s = max_episode_s
        self._stop = threading.Event()
        # Two threads: a sweep can wait seconds on a busy Docker engine, and a heartbeat
        # held up behind it would make this worker look dead to the others.
        self._threads = [
            threading.Thread(target=self._beat, name="heartbeat", daemon=True),
            threading.Thread(target=self._sweep_loop, name="janitor", daemon=True),
        ]

    def start(self) -> None:
        self.store.heartbeat(self.worker, host=self.host)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.store.heartbeat(self.worker, host=self.host)
            except RedisError as exc:
                log.warning("heartbeat: Redis error: %s", exc)

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self.sweep_s):
            try:
                self.sweep()
            except RedisError as exc:
                log.warning("janitor: Redis error: %s", exc)
            except Exception:
                log.exception("janitor: unexpected error")

    def sweep(self) -> None:
        self.store.forget_workers_older_than(FORGET_AFTER_S)
        live = set(self.store.live_workers(self.heartbeat_ttl_s))
        live |= {w for w in self.store.dead_workers(self.heartbeat_ttl_s) if self._alive_here(w)}
        self.end_abandoned(live)
        self.end_expired()
        if self.engine is not None:
            self.release_ended()
            self.reap_containers(live)
        if self.pool is not None:
            self.pool.drain_idle()

    def _alive_here(self, worker: str) -> bool:
        """A worker of this host whose process still exists is slow, not dead."""
        parts = worker.rsplit(".", 3)
        if len(parts) != 4 or parts[0] != self.host or not parts[1].isdigit():
            return False
        return process_start_ticks(int(parts[1])) == parts[2]

    def end_abandoned(self, live: set[str]) -> int:
        ended = 0
        for summary in self.store.live_summaries():
            if summary.worker is None or summary.worker in live:
                continue
            record = self.store.get(summary.id)
            if record is None:
                continue
            result = record.public().model_copy(update={
                "status": EpisodeStatus.failed,
                "verdict": Verdict.infra_error,
                "reward": None,
                "passed": None,
                "error": f"the worker running this episode ({summary.worker}) stopped",
            })
            if self.store.finish(EpisodeResult.model_validate(result.model_dump())):
                log.warning("episode %s: worker %s is gone; ended as infra_error",
                            summary.id, summary.worker)
                ended += 1
        return ended

    def end_expired(self) -> int:
        """Interactive episodes left idle, or open past the total limit, end as `timeout`."""
        now = time.time()
        ended = 0
        for summary in self.store.live_summaries():
            if not summary.interactive or summary.status is not EpisodeStatus.running:
                continue
            idle, age = now - summary.last_action, now - summary.created
            if idle <= self.idle_s and age <= self.max_episode_s:
                continue
            record = self.store.get(summary.id)
            if record is None:
                continue
            why = (f"no action for {idle:.0f} s (limit {self.idle_s:.0f} s)" if idle > self.idle_s
                   else f"open for {age:.0f} s (limit {self.max_episode_s:.0f} s)")
            result = record.public().model_copy(update={
                "status": EpisodeStatus.completed, "verdict": Verdict.timeout, "reward": 0.0,
                "passed": False, "reason": f"the episode was abandoned: {why}",
                "steps": self.store.steps(record.id),
            })
            if self.store.finish(EpisodeResult.model_validate(result.model_dump())):
                log.info("episode %s: ended as timeout, %s", record.id, why)
                ended += 1
        return ended

    def release_ended(self) -> None:
        """Remove the containers of this process's episodes that ended elsewhere (a cancel,
        a trainer's deadline, an idle limit): a running test or agent stops there."""
        assert self.engine is not None
        for episode_id, container_id in list(self.holding.items()):
            status = self.store.status(episode_id)
            if status is None or status.terminal:
                self.engine.remove(container_id)
                self.holding.pop(episode_id, None)
                log.info("episode %s: ended; container %s removed", episode_id, container_id[:12])

    def reap_containers(self, live: set[str]) -> int:
        assert self.engine is not None
        try:
            containers = self.engine.managed_containers()
        except SandboxError as exc:
            log.warning("janitor: cannot list sandboxes: %s", exc)
            return 0
        reaped = 0
        # a sandbox that is not running is of no use to anyone, whichever deployment made
        # it (an engine restart stops them all): sweep those too
        try:
            stopped = [c for c in self.engine.managed_containers(any_deployment=True)
                       if c.get("State") not in ("running", "created", "restarting")]
        except SandboxError:
            stopped = []
        for info in stopped:
            self.engine.remove(str(info["Id"]))
            reaped += 1
        for info in containers:
            owner = (info.get("Labels") or {}).get(WORKER_LABEL)
            if owner == self.worker or owner in live:
                continue
            log.info("janitor: removing container %s of stopped worker %s",
                     str(info.get("Id", ""))[:12], owner)
            self.engine.remove(str(info["Id"]))
            reaped += 1
        return reaped
