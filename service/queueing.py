"""Putting episodes on the RQ queues.

The API refers to job functions by dotted path, so it never imports the worker side (and
with it Docker). Payloads are JSON: the job carries only the episode id; the episode itself
lives in its Redis record.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis
from rq import Queue
from rq.serializers import JSONSerializer

from proctor.models import EpisodeCreate
from service.store import EpisodeStore, new_episode_id

QUEUE_NAME = "proctor"
RUN_EPISODE = "workers.jobs.run_episode"
RUN_ACTION = "workers.jobs.run_action"
FINISH_EPISODE = "workers.jobs.finish_episode"
# RQ's own bookkeeping outlives the job by this much; our record carries the result.
JOB_RESULT_TTL_S = 60
# Beyond the test timeout, an episode needs time to start a sandbox, write files, clean up.
JOB_OVERHEAD_S = 120


def host_queue_name(host_id: str) -> str:
    """The queue served only by workers on one host: actions must reach their container."""
    return f"{QUEUE_NAME}.host.{host_id}"


def job_timeout_s(request: EpisodeCreate) -> int:
    limits = request.task.limits
    actions = request.solution.actions if request.solution else []
    acting = sum(getattr(a, "timeout_s", 0.0) for a in actions)
    setup = len(request.task.setup) * limits.timeout_s
    return int(limits.timeout_s + acting + setup + JOB_OVERHEAD_S)


class EpisodeQueue:
    def __init__(self, client: redis.Redis, store: EpisodeStore) -> None:
        self.redis = client
        self.store = store
        self.queue = Queue(QUEUE_NAME, connection=client, serializer=JSONSerializer)

    def submit(self, requests: Sequence[EpisodeCreate]) -> list[str]:
        """Store and enqueue episodes in one pipeline (one round trip for a whole batch)."""
        ids = [new_episode_id() for _ in requests]
        pipe = self.redis.pipeline()
        for episode_id, request in zip(ids, requests, strict=True):
            self.store.add(pipe, episode_id, request)
        jobs = [
            Queue.prepare_data(
                RUN_EPISODE,
                args=[episode_id],
                job_id=episode_id,
                timeout=job_timeout_s(request),
                result_ttl=JOB_RESULT_TTL_S,
                failure_ttl=JOB_RESULT_TTL_S * 60,
                description=f"episode {episode_id}",
            )
            for episode_id, request in zip(ids, requests, strict=True)
        ]
        self.queue.enqueue_many(jobs, pipeline=pipe)
        pipe.execute()
        return ids

    def to_host(self, host: str, func: str, args: list[object], *, timeout_s: float) -> None:
        """Enqueue a job that must run on one host (where an episode's container lives)."""
        queue = Queue(host_queue_name(host), connection=self.redis, serializer=JSONSerializer)
        queue.enqueue_call(func, args=args, timeout=int(timeout_s) + JOB_OVERHEAD_S,
                           result_ttl=JOB_RESULT_TTL_S, failure_ttl=JOB_RESULT_TTL_S * 60)

    def depth(self) -> int:
        return int(self.queue.count)
