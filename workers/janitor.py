"""Keeping the books straight: heartbeats, abandoned episodes, orphaned containers.

Runs as a thread in every worker process. Every episode must end, also when the worker
running it dies: an episode whose worker has stopped sending heartbeats is ended as
`failed`/`infra_error` with no reward. It is not retried: the solution may be what killed
the worker (a poison pill), and trainers retry on their own terms; a null reward tells
them to drop the sample. Containers whose worker is gone are removed by label.
"""

from __future__ import annotations

import logging
import threading
import time

from redis.exceptions import RedisError

from proctor.models import EpisodeResult, EpisodeStatus, Verdict
from service.store import EpisodeStore
from workers.sandbox.docker import WORKER_LABEL, Engine, SandboxError
from workers.sandbox.pool import WarmPool

log = logging.getLogger(__name__)


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
    ) -> None:
        self.store = store
        self.worker = worker
        self.host = host
        self.heartbeat_s = heartbeat_s
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.sweep_s = sweep_s
        self.engine = engine
        self.pool = pool
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="janitor", daemon=True)

    def start(self) -> None:
        self.store.heartbeat(self.worker, host=self.host)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        last_sweep = 0.0
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.store.heartbeat(self.worker, host=self.host)
                if time.monotonic() - last_sweep >= self.sweep_s:
                    last_sweep = time.monotonic()
                    self.sweep()
            except RedisError as exc:
                log.warning("janitor: Redis error: %s", exc)
            except Exception:
                log.exception("janitor: unexpected error")

    def sweep(self) -> None:
        live = set(self.store.live_workers(self.heartbeat_ttl_s))
        self.end_abandoned(live)
        if self.engine is not None:
            self.reap_containers(live)
        if self.pool is not None:
            self.pool.drain_idle()

    def end_abandoned(self, live: set[str]) -> int:
        ended = 0
        for record in self.store.get_many(self.store.active_ids()):
            if record is None or record.status is EpisodeStatus.queued:
                continue
            owner = record.fields.get("worker")
            if owner is None or owner in live:
                continue
            result = record.public().model_copy(update={
                "status": EpisodeStatus.failed,
                "verdict": Verdict.infra_error,
                "reward": None,
                "passed": None,
                "error": f"the worker running this episode ({owner}) stopped",
            })
            if self.store.finish(EpisodeResult.model_validate(result.model_dump())):
                log.warning("episode %s: worker %s is gone; ended as infra_error", record.id, owner)
                ended += 1
        return ended

    def reap_containers(self, live: set[str]) -> int:
        assert self.engine is not None
        try:
            containers = self.engine.managed_containers()
        except SandboxError as exc:
            log.warning("janitor: cannot list sandboxes: %s", exc)
            return 0
        reaped = 0
        for info in containers:
            owner = (info.get("Labels") or {}).get(WORKER_LABEL)
            if owner == self.worker or owner in live:
                continue
            log.info("janitor: removing container %s of stopped worker %s",
                     str(info.get("Id", ""))[:12], owner)
            self.engine.remove(str(info["Id"]))
            reaped += 1
        return reaped
