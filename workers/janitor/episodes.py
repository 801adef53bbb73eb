"""Ending what nobody else will: every episode must end, also when the worker running it
dies.

An episode whose worker has stopped sending heartbeats is ended as `failed`/`infra_error`
with no reward (`end_abandoned`). It is not retried: the solution may be what killed the
worker (a poison pill), and trainers retry on their own terms; a null reward tells them to
drop the sample. An episode still `queued` can be abandoned too, and is ended the same way
once it is older than a heartbeat TTL (`end_unstarted`): its RQ job was taken by a worker
that is gone (the job names it, or — taken and never marked — it is older than the head of
the FIFO queue), it has no job (the API died between creating the record and enqueueing),
or its job ended without starting it. This worker's own episodes whose end was lost are
ended too (`end_lost`), and interactive episodes past their limits time out
(`end_expired`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from rq import Queue
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from core.endings import infra_failure, timed_out
from core.queues import QUEUE_NAME
from core.store import EpisodeRecord, EpisodeStore, EpisodeSummary
from proctor.models import EpisodeStatus

log = logging.getLogger(__name__)

ENDED_JOB = {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}


class EpisodeEnds:
    """The episodes a sweep ends: abandoned, never to start, lost, expired."""

    def __init__(
        self,
        store: EpisodeStore,
        *,
        worker: str,
        heartbeat_ttl_s: float,
        idle_s: float,
        max_episode_s: float,
        holding: dict[str, str],
        busy: set[str],
    ) -> None:
        self.store = store
        self.worker = worker
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.idle_s = idle_s
        self.max_episode_s = max_episode_s
        self.holding = holding  # see `Janitor`
        self.busy = busy
        # our episodes that we neither hold nor run (their end was lost): id → first seen
        self._lost: dict[str, float] = {}

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
