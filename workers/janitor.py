"""Keeping the books straight: heartbeats, abandoned episodes, orphaned containers.

Runs as a thread in every worker process. Every episode must end, also when the worker
running it dies: an episode whose worker has stopped sending heartbeats is ended as
`failed`/`infra_error` with no reward. It is not retried: the solution may be what killed
the worker (a poison pill), and trainers retry on their own terms; a null reward tells
them to drop the sample. Containers whose worker is gone are removed by label.

An episode still `queued` can be abandoned too, and is ended the same way once it is older
than a heartbeat TTL: its RQ job was taken by a worker that is gone (the job names it, or —
taken and never marked — it is older than the head of the FIFO queue), it has no job (the
API died between creating the record and enqueueing), or its job ended without starting it.

The shares of the host's budget (workers/capacity.py) are given back here too: a dead
worker's (one off the registry at once, one only silent once silence is judged), and
this process's own whose episode ended without its job giving it back.

Silence is judged only while Redis answers: after an outage everyone's heartbeats are old,
so a janitor judges no other worker until its own have gone through for a whole TTL.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from redis.exceptions import RedisError
from rq import Queue
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from core.defaults import (
    FORGET_WORKER_AFTER_S,
    IMAGE_CHECK_SWEEPS,
    INTERACTIVE_IDLE_S,
    JANITOR_STOP_S,
    MAX_EPISODE_S,
    OUTAGE_BEATS,
)
from core.queues import QUEUE_NAME
from core.results import infra_failure, timed_out
from core.store import EpisodeRecord, EpisodeStore, EpisodeSummary
from proctor.models import EpisodeStatus
from workers.sandbox.engine import DEPLOYMENT_LABEL, WORKER_LABEL, Engine, SandboxError

log = logging.getLogger(__name__)

ENDED_JOB = {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: [state, ppid, …]; [] when there is none."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_start_ticks(pid: int) -> str:
    """When a process started (clock ticks since boot): with its PID, who it is."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else "0"


def process_alive(pid: int, start_ticks: str) -> bool:
    """The process that started at `start_ticks` runs: exists, and is not a zombie (a
    dead child its parent has not reaped keeps its PID and start time)."""
    fields = _stat(pid)
    return len(fields) > 19 and fields[19] == start_ticks and fields[0] not in ("Z", "X")


def worker_name(host_id: str, *, pid: int | None = None, suffix: str | None = None) -> str:
    """`host.pid.start.suffix`: a restarted container may reuse the PID, never the start.

    A supervisor names its child (`pid`, and the `suffix` it gave the child) to forget
    it the moment it dies.
    """
    pid = os.getpid() if pid is None else pid
    suffix = suffix or uuid.uuid4().hex[:4]
    return f"{host_id}.{pid}.{process_start_ticks(pid)}.{suffix}"


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
        self.worker = worker
        self.host = host
        self.heartbeat_s = heartbeat_s
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.sweep_s = sweep_s
        self.engine = engine
        self.pools = pools
        # episodes whose container this process holds: episode id → container id
        self.holding = holding if holding is not None else {}
        # episodes this process is running a job for right now
        self.busy = busy if busy is not None else set()
        # the images this worker serves (name → reference), re-checked every few sweeps: an
        # image removed after start must turn submissions for it away, not queue them forever
        # (every process of a host asks the engine about each image: not every sweep)
        self.images = dict(images or {})
        self._sweeps = 0
        # our episodes that we neither hold nor run (their end was lost): id → first seen
        self._lost: dict[str, float] = {}
        # since when our heartbeats have gone through without a gap (see the docstring)
        self._answering_since = self._last_beat = time.time()
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
        self._answering_since = self._last_beat = time.time()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=JANITOR_STOP_S)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.store.heartbeat(self.worker, host=self.host)
            except RedisError as exc:
                log.warning("heartbeat: Redis error: %s", exc)
                continue
            self.beat_went_through(time.time())

    def beat_went_through(self, now: float) -> None:
        if now - self._last_beat > OUTAGE_BEATS * self.heartbeat_s:
            log.warning(
                "heartbeat: Redis was out of reach for %.0f s; judging no other worker for %.0f s",
                now - self._last_beat,
                self.heartbeat_ttl_s,
            )
            self._answering_since = now
        self._last_beat = now

    def judging(self) -> bool:
        """Whether other workers' silence means anything: our own link has held a TTL."""
        now = time.time()
        recent = now - self._last_beat <= OUTAGE_BEATS * self.heartbeat_s
        return recent and now - self._answering_since >= self.heartbeat_ttl_s

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
        judging = self.judging()
        live = set(self.store.live_workers(self.heartbeat_ttl_s))
        live |= {w for w in self.store.dead_workers(self.heartbeat_ttl_s) if self._alive_here(w)}
        # one scan of the live episodes serves the three checks of this sweep
        summaries = self.store.live_summaries()
        if judging:
            self.end_abandoned(live, summaries)
            self.end_unstarted(live)
        self.end_lost(summaries)
        self.end_expired(summaries)
        if self.engine is not None:
            self.release_ended()
            self.release_shares(judging=judging)
            self.reap_containers(live, others=judging)
            if self.images and self._sweeps % IMAGE_CHECK_SWEEPS == 0:
                self.publish_images()
            self._sweeps += 1
        for pool in self.pools:
            pool.drain_idle()

    def publish_images(self) -> None:
        assert self.engine is not None
        report = {name: self.engine.image_problem(ref) for name, ref in self.images.items()}
        for name, problem in report.items():
            if problem:
                log.warning("janitor: image %s cannot run here: %s", name, problem)
        self.store.publish_images(self.worker, report)

    def _alive_here(self, worker: str) -> bool:
        """A worker of this host whose process still runs is slow, not dead."""
        parts = worker.rsplit(".", 3)
        if len(parts) != 4 or parts[0] != self.host or not parts[1].isdigit():
            return False
        return process_alive(int(parts[1]), parts[2])

    def _end_as_infra(self, record: EpisodeRecord, error: str) -> bool:
        if self.store.finish(infra_failure(record, error)):
            log.warning("episode %s: %s; ended as infra_error", record.id, error)
            return True
        return False

    def end_abandoned(
        self, live: set[str], summaries: Sequence[EpisodeSummary] | None = None
    ) -> int:
        ended = 0
        for summary in self.store.live_summaries() if summaries is None else summaries:
            if summary.worker is None or summary.worker in live:
                continue
            record = self.store.get(summary.id)
            if record is None:
                continue
            ended += self._end_as_infra(
                record, f"the worker running this episode ({summary.worker}) stopped"
            )
        return ended

    def end_unstarted(self, live: set[str]) -> int:
        """Queued episodes that nothing will start any more (see the module docstring)."""
        ids = self.store.queued_ids(older_than_s=self.heartbeat_ttl_s)
        if not ids:
            return 0
        connection = self.store.redis
        jobs = Job.fetch_many(ids, connection=connection, serializer=JSONSerializer)
        head = Queue(QUEUE_NAME, connection=connection, serializer=JSONSerializer).get_job_ids(0, 1)
        # what was enqueued before the queue's head has been taken off it (None: unknown)
        taken_before: datetime | None = datetime.now(UTC)
        if head:
            [head_job] = Job.fetch_many(head, connection=connection, serializer=JSONSerializer)
            taken_before = head_job.enqueued_at if head_job is not None else None
        margin = timedelta(seconds=self.heartbeat_ttl_s)
        records = self.store.get_many(ids)
        gone = [i for i, r in zip(ids, records, strict=True) if r is None]
        self.store.drop_ids(gone)  # expired while queued: nothing to end
        ended = 0
        for job, record in zip(jobs, records, strict=True):
            if record is None or record.status is not EpisodeStatus.queued:
                continue
            why = _why_unstarted(job, live, taken_before, margin)
            if why is not None:
                ended += self._end_as_infra(record, why)
        return ended

    def end_lost(self, summaries: Sequence[EpisodeSummary] | None = None) -> int:
        """Episodes Redis says this process runs, but it neither runs nor holds them: their
        end was written and then lost (Redis killed before it saved). Nobody else would
        end them — this worker is alive."""
        now = time.time()
        if summaries is None:
            summaries = self.store.live_summaries()
        mine = {s.id for s in summaries if s.worker == self.worker}
        lost = mine - self.busy - set(self.holding)
        self._lost = {i: self._lost.get(i, now) for i in lost}
        ended = 0
        for episode_id, since in list(self._lost.items()):
            if now - since < self.heartbeat_ttl_s:
                continue
            record = self.store.get(episode_id)
            if (
                record is not None
                and not record.status.terminal
                and self._end_as_infra(
                    record, "the worker lost track of this episode (its result was not saved)"
                )
            ):
                ended += 1
            self._lost.pop(episode_id, None)
        return ended

    def end_expired(self, summaries: Sequence[EpisodeSummary] | None = None) -> int:
        """Interactive episodes left idle, or open past the total limit, end as `timeout`."""
        now = time.time()
        ended = 0
        for summary in self.store.live_summaries() if summaries is None else summaries:
            if not summary.interactive or summary.status is not EpisodeStatus.running:
                continue
            idle, age = now - summary.last_action, now - summary.created
            if idle <= self.idle_s and age <= self.max_episode_s:
                continue
            record = self.store.get(summary.id)
            if record is None:
                continue
            why = (
                f"no action for {idle:.0f} s (limit {self.idle_s:.0f} s)"
                if idle > self.idle_s
                else f"open for {age:.0f} s (limit {self.max_episode_s:.0f} s)"
            )
            result = timed_out(
                record, f"the episode was abandoned: {why}", steps=self.store.steps(record.id)
            )
            if self.store.finish(result):
                log.info("episode %s: ended as timeout, %s", record.id, why)
                ended += 1
        return ended

    def release_ended(self) -> None:
        """Remove the containers of this process's episodes that ended elsewhere (a cancel,
        a trainer's deadline, an idle limit): a running test or agent stops there."""
        assert self.engine is not None
        for episode_id, container_id in list(self.holding.items()):
            status = self.store.status(episode_id)
            # still held after the read: an episode that ended normally meanwhile let go of
            # its container first, which a pool may have handed to the next episode already
            if (status is None or status.terminal) and self.holding.get(episode_id) == container_id:
                self.engine.remove(container_id)
                self.holding.pop(episode_id, None)
                self.store.release(self.host, episode_id)
                log.info("episode %s: ended; container %s removed", episode_id, container_id[:12])

    def release_shares(self, *, judging: bool) -> int:
        """Give back the shares of this host's budget that nobody else will: those of
        workers off the registry (they stopped, or their supervisor saw them die), of
        silent ones (when `judging`), and this process's own whose episode ended while it
        neither runs nor holds it."""
        by_worker: dict[str, list[str]] = {}
        for episode_id, share in self.store.reservations(self.host).items():
            by_worker.setdefault(share.worker, []).append(episode_id)
        if not by_worker:
            return 0
        # read after the shares: a worker registers before it takes any
        live = set(self.store.live_workers(self.heartbeat_ttl_s))
        silent = set(self.store.dead_workers(self.heartbeat_ttl_s))
        live |= {w for w in silent if self._alive_here(w)}
        released = 0
        for worker, episode_ids in by_worker.items():
            if worker == self.worker:
                idle = [i for i in episode_ids if i not in self.busy and i not in self.holding]
                statuses = [self.store.status(i) for i in idle]
                ended = [i for i, s in zip(idle, statuses, strict=True) if s is None or s.terminal]
                released += self.store.release_of(self.host, worker, ended)
            elif worker not in live | silent or (judging and worker not in live):
                count = self.store.release_of(self.host, worker, episode_ids)
                if count:
                    log.warning("janitor: gave back %d shares of stopped worker %s", count, worker)
                released += count
        return released

    def _unclaimed(self, stopped: Mapping[str, Any], live: set[str] | None) -> bool:
        """Whether no episode will ask the engine why this sandbox stopped (the evidence of
        its verdict: its init killed for lack of memory, say). This process's own episodes
        hold theirs; another worker's may (an interactive episode's action or finish runs
        in any worker), so they wait for its janitor, or for it to be known gone (`live`,
        None while workers are not judged); another deployment's, whose workers this one
        does not see, are swept once stopped longer than an episode may run."""
        assert self.engine is not None
        labels = stopped.get("Labels") or {}
        owner = labels.get(WORKER_LABEL)
        if owner == self.worker:
            return str(stopped["Id"]) not in self.holding.values()
        if labels.get(DEPLOYMENT_LABEL) == self.engine.deployment:
            return live is not None and owner not in live
        since = self.engine.stopped_at(str(stopped["Id"]))
        return since is None or time.time() - since > MAX_EPISODE_S

    def reap_containers(self, live: set[str], *, others: bool = True) -> int:
        """Remove stopped sandboxes, and (`others`) those of workers not in `live`."""
        assert self.engine is not None
        try:
            containers = self.engine.managed_containers()
        except SandboxError as exc:
            log.warning("janitor: cannot list sandboxes: %s", exc)
            return 0
        # a sandbox that is not running is of no use to anyone, whichever deployment made
        # it (an engine restart stops them all): sweep those too
        try:
            stopped = [
                c
                for c in self.engine.managed_containers(any_deployment=True)
                if c.get("State") not in ("running", "created", "restarting")
            ]
        except SandboxError:
            stopped = []
        removed: set[str] = set()
        for info in stopped:
            if self._unclaimed(info, live if others else None):
                removed.add(str(info["Id"]))
        for info in containers if others else []:
            owner = (info.get("Labels") or {}).get(WORKER_LABEL)
            if owner == self.worker or owner in live or str(info["Id"]) in removed:
                continue
            log.info(
                "janitor: removing container %s of stopped worker %s",
                str(info.get("Id", ""))[:12],
                owner,
            )
            removed.add(str(info["Id"]))
        for container_id in removed:
            self.engine.remove(container_id)
        return len(removed)


def _why_unstarted(
    job: Job | None, live: set[str], taken_before: datetime | None, margin: timedelta
) -> str | None:
    """Why a queued episode (older than `margin`) will never start, or None if it may."""
    if job is None:
        return "the episode was never put on the queue (or its job expired)"
    status = job.get_status(refresh=False)
    if status is JobStatus.STARTED:
        if job.worker_name and job.worker_name not in live:
            return f"the worker that took this episode ({job.worker_name}) stopped"
        return None
    if status in ENDED_JOB:
        return f"its job ended ({status.value}) before the episode started"
    # the queue is FIFO: a job well older than its head was taken off it, and whoever took
    # it died before marking it started (the clocks of API replicas differ: a margin)
    if (
        status is JobStatus.QUEUED
        and job.origin == QUEUE_NAME
        and job.enqueued_at is not None
        and taken_before is not None
        and job.enqueued_at < taken_before - margin
    ):
        return "the worker that took this episode off the queue stopped before starting it"
    return None
