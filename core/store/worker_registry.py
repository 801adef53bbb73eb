"""The worker registry: who is alive (heartbeats, `workers`), on which host
(`worker-hosts`), and what keeps a live one from running episodes (`worker-problems`)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import redis

from core import keys
from core.store.encoding import as_text


class WorkerRegistry:
    """Heartbeats and problems (`EpisodeStore.heartbeat`, `.live_workers`, …)."""

    redis: redis.Redis

    def heartbeat(self, worker: str, *, host: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(keys.WORKERS, {worker: time.time()})
        pipe.hset(keys.WORKER_HOSTS, worker, host)
        pipe.execute()

    def forget_worker(self, worker: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(keys.WORKERS, worker)
        pipe.hdel(keys.WORKER_HOSTS, worker)
        pipe.hdel(keys.WORKER_PROBLEMS, worker)
        pipe.hdel(keys.WORKER_IMAGES, worker)
        pipe.execute()

    def forget_workers_older_than(self, age_s: float) -> None:
        for worker in self.redis.zrangebyscore(keys.WORKERS, "-inf", time.time() - age_s):
            self.forget_worker(as_text(worker))

    def report_problem(self, worker: str, problem: str | None) -> None:
        """A worker that is alive but cannot run episodes (Docker down, image missing)."""
        if problem:
            self.redis.hset(keys.WORKER_PROBLEMS, worker, problem)
        else:
            self.redis.hdel(keys.WORKER_PROBLEMS, worker)

    def worker_problems(self, workers: Sequence[str]) -> dict[str, str]:
        if not workers:
            return {}
        values = self.redis.hmget(keys.WORKER_PROBLEMS, list(workers))
        return {w: as_text(v) for w, v in zip(workers, values, strict=True) if v}

    def live_workers(self, ttl_s: float) -> list[str]:
        return [
            as_text(x) for x in self.redis.zrangebyscore(keys.WORKERS, time.time() - ttl_s, "+inf")
        ]

    def dead_workers(self, ttl_s: float) -> list[str]:
        return [
            as_text(x) for x in self.redis.zrangebyscore(keys.WORKERS, "-inf", time.time() - ttl_s)
        ]
