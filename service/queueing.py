"""Putting episodes on the RQ queues.

The API refers to job functions by dotted path, so it never imports the worker side (and
with it Docker). Payloads are JSON: the job carries only the episode id; the episode itself
lives in its Redis record.

Dedup covers retries, not samples (`dedup_key`): a one-shot request that carries an
idempotency key (the field, or the `Idempotency-Key` header the routes copy into it) gets
the episode of an earlier request with the same key and the same content, in flight or
recently completed, instead of a second sandbox. Without a key every request is a run of
its own: two identical programs are two samples, and a timing-dependent program's second
sample must be measured, not copied. A caller that wants identical requests to share
(reruns of one data set) says so (`share_identical`). A retry after an infrastructure
failure (status `failed`) or a cancel runs again.

Dedup, the queue bound and the records are one atomic step in Redis (`EpisodeStore.create`),
so concurrent retries share one episode and concurrent clients cannot overshoot
the bound; the RQ jobs are enqueued right after (an API that dies in between leaves queued
episodes without a job, which the workers' janitor ends).

A refusal also tells how long the queue takes, by its drain rate, to take one more
episode; until then this API process refuses new work at the door (`check_open`; for the
routes that queue episodes, `service.door` answers in front of the application), before
the body is read or Redis is asked. Then one request at a time is let through to find
out, until Redis admits one. A flood of clients that resend at once on a 429 then costs
the API little, and the episodes it accepts are not held up behind it. A retry that
would have shared a queued episode is refused too meanwhile.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import time
from collections.abc import Sequence

import redis
from rq import Queue
from rq.serializers import JSONSerializer

from core import keys
from core.defaults import (
    COMPILE_WALL_FACTOR,
    COMPILE_WALL_SLACK_S,
    DEDUP_TTL_S,
    FAILED_JOB_TTL_S,
    HEARTBEAT_TTL_S,
    INTAKE_LANES,
    JOB_OVERHEAD_S,
    MAX_QUEUE_DEPTH,
    MAX_QUEUE_WAIT_S,
    MAX_SHUT_S,
    QUEUE_FULL_RETRY_AFTER_S,
    SUCCEEDED_JOB_TTL_S,
)
from core.languages import LANGUAGES
from core.queues import (
    QUEUE_NAME,
    RUN_ACTION,
    RUN_EPISODE,
    host_actions_queue_name,
    host_queue_name,
)
from core.store import EpisodeStore
from proctor.models import EpisodeCreate, EpisodeMode
from service.errors import Overloaded
from service.overload import retry_after

# The request of this context that was let through after a refusal (`check_open`)
_PROBE: contextvars.ContextVar[object | None] = contextvars.ContextVar("probe", default=None)
# … and the intake lane it holds (`enter`)
_LANE: contextvars.ContextVar[_Lane | None] = contextvars.ContextVar("lane", default=None)


def content_key(request: EpisodeCreate) -> str:
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return keys.dedup(hashlib.sha256(canonical.encode()).hexdigest())


def dedup_key(request: EpisodeCreate) -> str | None:
    """The key a request shares an episode under, or None: it runs on its own.

    The content is part of the key either way (the key is a digest of the request, which
    holds the idempotency key): a key reused for a different request is a new run, never
    another request's answer."""
    if request.mode is not EpisodeMode.oneshot:
        return None
    if request.idempotency_key is None and not request.share_identical:
        return None
    return content_key(request)


def job_timeout_s(request: EpisodeCreate) -> int:
    limits = request.task.limits
    actions = request.solution.actions if request.solution else []
    acting = sum(getattr(a, "timeout_s", 0.0) for a in actions)
    setup = len(request.task.setup) * limits.timeout_s
    lang = LANGUAGES.get(request.task.language or "")
    # a compile runs at most this long by the wall clock (`grading.compile_step`)
    compiling = (
        limits.compile_timeout_s * COMPILE_WALL_FACTOR + COMPILE_WALL_SLACK_S
        if lang is not None and lang.compiled
        else 0.0
    )
    return int(limits.timeout_s + acting + setup + compiling + JOB_OVERHEAD_S)


class EpisodeQueue:
    def __init__(
        self,
        client: redis.Redis,
        store: EpisodeStore,
        *,
        max_depth: int = MAX_QUEUE_DEPTH,
        max_wait_s: float = MAX_QUEUE_WAIT_S,
        worker_ttl_s: float = HEARTBEAT_TTL_S,
        dedup_ttl_s: int = DEDUP_TTL_S,
        intake_lanes: int = INTAKE_LANES,
    ) -> None:
        self.redis = client
        self.store = store
        self.max_depth = max_depth
        self.max_wait_s = max_wait_s
        self.worker_ttl_s = worker_ttl_s
        self.dedup_ttl_s = dedup_ttl_s
        self.queue = Queue(QUEUE_NAME, connection=client, serializer=JSONSerializer)
        self._shut_until = 0.0  # monotonic: refuse at the door until then
        self._refused_last = False  # the last answer from Redis was a refusal
        self._probe: tuple[object, float] | None = None  # let through, until (monotonic)
        self._lanes = asyncio.Semaphore(intake_lanes)

    async def enter(self) -> None:
        """Take an intake lane, then pass the door (`check_open`). At most `intake_lanes`
        requests are between the door and their answer from Redis; the others wait here,
        and are refused here if the door shuts meanwhile.
        Without lanes, a burst into an open door is validated and sent to Redis whole
        before the first refusal can shut it. The caller calls `leave` once Redis
        answered (or never will)."""
        await self._lanes.acquire()
        _LANE.set(_Lane(self._lanes))
        try:
            self.check_open()
        except Overloaded:
            self.leave()
            raise

    def check_open(self) -> None:
        """Refuse (429) while the last refusal's drain estimate says no episode would pass,
        and then, until Redis answers again, all but one request: the probe, let through to
        find out whether one more passes. Without it, every request in line when the door
        opened would ask Redis, and all but one be refused, at full cost."""
        now = time.monotonic()
        left = self._shut_until - now
        if left > 0:
            raise Overloaded(
                f"the queue is over its bound (about {left:.2f} s more by its drain rate); "
                "retry later",
                headers={"Retry-After": retry_after(left)},
            )
        if not self._refused_last or _PROBE.get() is not None:
            return
        probe = self._probe
        if probe is not None and probe[1] > now:
            raise Overloaded(
                "the queue is over its bound (a request is finding out whether one more "
                "episode passes); retry later",
                headers={"Retry-After": "1"},
            )
        token = object()
        self._probe = (token, now + MAX_SHUT_S)
        _PROBE.set(token)

    def leave(self) -> None:
        """This context's request leaves the intake: it has its answer from Redis, will never
        ask (a bad body, an image no worker has) or has a while to go before it asks (a
        repository to seal). Its lane goes to the next request, and if it was the probe,
        another may find out. Called on the event loop; more than once is harmless."""
        lane = _LANE.get()
        if lane is not None:
            lane.leave()
        token, probe = _PROBE.get(), self._probe
        if token is not None and probe is not None and probe[0] is token:
            self._probe = None

    def submit(
        self, requests: Sequence[EpisodeCreate], *, patience_s: float | None = None
    ) -> list[str]:
        """Store and enqueue episodes (a whole batch at once, or none of it); ids in order.

        Retries (one idempotency key) share one episode (see the module docstring). Beyond
        a bound — the queue's depth, or the wait the batch's first episode would see — the
        whole batch is refused (429) rather than queue work nobody will wait for.
        `patience_s`: a held adapter request's own wait bound instead of the deployment's
        (`service.overload`); such a call neither asks the door nor shuts it.
        """
        held = patience_s is not None
        if not held:
            self.check_open()
        bound = self.max_wait_s if patience_s is None or not self.max_wait_s else patience_s
        dedup_keys = [dedup_key(r) if self.dedup_ttl_s > 0 else None for r in requests]
        admission = self.store.create(
            requests,
            dedup_keys=dedup_keys,
            max_queued=self.max_depth,
            max_wait_s=bound,
            worker_ttl_s=self.worker_ttl_s,
            dedup_ttl_s=self.dedup_ttl_s,
        )
        if not held:
            self._refused_last, self._probe = admission.refused, None
            if admission.refused:
                self._shut_until = time.monotonic() + min(admission.reopen_s, MAX_SHUT_S)
        if admission.refused and admission.wait_s is not None:
            raise Overloaded(
                f"the queue holds {admission.depth} episodes: about {admission.wait_s:.1f} s "
                f"of waiting before a new one starts (bound {bound:g} s); retry later",
                # by then the queue has drained to what the bound admits
                headers={"Retry-After": retry_after(admission.reopen_s)},
            )
        if admission.refused:
            raise Overloaded(
                f"the queue holds {admission.depth} episodes (bound {self.max_depth}); retry later",
                headers={"Retry-After": str(QUEUE_FULL_RETRY_AFTER_S)},
            )
        ids = admission.ids
        new = [(i, r) for i, r in enumerate(requests) if admission.new[i]]
        if not new:
            return ids
        pipe = self.redis.pipeline()
        jobs = [
            Queue.prepare_data(
                RUN_EPISODE,
                args=[episode_id],
                job_id=episode_id,
                timeout=job_timeout_s(request),
                result_ttl=SUCCEEDED_JOB_TTL_S,
                failure_ttl=FAILED_JOB_TTL_S,
                description=f"episode {episode_id}",
            )
            for episode_id, request in ((ids[i], r) for i, r in new)
        ]
        self.queue.enqueue_many(jobs, pipeline=pipe)
        pipe.execute()
        return ids

    def to_host(self, host: str, func: str, args: list[object], *, timeout_s: float) -> None:
        """Enqueue a job that must run on one host (where an episode's container lives);
        an action on the host's queue its workers take first."""
        name = host_actions_queue_name(host) if func == RUN_ACTION else host_queue_name(host)
        queue = Queue(name, connection=self.redis, serializer=JSONSerializer)
        queue.enqueue_call(
            func,
            args=args,
            timeout=int(timeout_s) + JOB_OVERHEAD_S,
            result_ttl=SUCCEEDED_JOB_TTL_S,
            failure_ttl=FAILED_JOB_TTL_S,
        )

    def depth(self) -> int:
        """Episodes waiting for a worker (the bound counts these)."""
        return self.store.queued_count()


class _Lane:
    """An intake lane held by one request: left once."""

    def __init__(self, lanes: asyncio.Semaphore) -> None:
        self._lanes: asyncio.Semaphore | None = lanes

    def leave(self) -> None:
        if self._lanes is not None:
            self._lanes.release()
            self._lanes = None
