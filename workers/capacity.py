"""A host's capacity: its CPU and memory budget, and each episode's share of it.

A host runs as many episodes at once as its budget holds — its CPUs times
`PROCTOR_CPU_OVERSUBSCRIBE` and its memory times `PROCTOR_MEMORY_OVERSUBSCRIBE` — not as
many as it has worker processes: `auto` starts as many processes as the budget holds
episodes of the default size (`Limits()`), and every one-shot episode reserves its own
`cpus` and `memory_mb` from the budget the host's processes share in Redis
(`EpisodeStore.reserve`) before it starts its sandbox, waiting (at most `RESERVE_WAIT_S`)
while the budget is full — in line, first come first served, so a share given back goes to
the episode that waited longest, not to the worker that gave it back. Interactive episodes
take no share (see `workers/jobs.py`): an open one mostly waits for its agent, and a share
held while idle would cap a host at a handful of open episodes while the processes that
serve their actions wait for budget.

A share is given back when its episode's job ends (`finally`), and — a worker that died
takes nothing with it — by the supervisor the moment it reaps the process, and by every
janitor for the workers it finds dead.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

from redis.exceptions import RedisError

from core import defaults
from core.config import Settings
from core.limits import host_cpus, host_memory_mb, within_host
from core.store import EpisodeRecord, EpisodeStore, Share
from proctor.models import Limits
from workers.sandbox.engine import NoCapacity

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HostBudget:
    """What the sandboxes running at once on one host may hold together."""

    millicpus: int
    memory_mb: int

    @classmethod
    def of(cls, settings: Settings) -> HostBudget:
        return cls(
            millicpus=int(host_cpus() * settings.cpu_oversubscribe * 1000),
            memory_mb=int(host_memory_mb() * settings.memory_oversubscribe),
        )

    def processes(self) -> int:
        """Worker processes for `auto`: episodes of the default size the budget holds, each
        process's own memory counted, at most `AUTO_WORKERS_MAX`."""
        least = Limits()
        by_cpu = self.millicpus // millicpus(least.cpus)
        by_memory = self.memory_mb // (least.memory_mb + defaults.WORKER_PROCESS_MB)
        return max(1, min(by_cpu, by_memory, defaults.AUTO_WORKERS_MAX))

    def as_tuple(self) -> tuple[int, int]:
        return self.millicpus, self.memory_mb


def millicpus(cpus: float) -> int:
    return max(round(cpus * 1000), 1)


def worker_count(settings: Settings) -> int:
    """The worker processes a host starts: the setting, or what its budget holds."""
    if settings.worker_concurrency != "auto":
        return settings.worker_concurrency
    budget = HostBudget.of(settings)
    count = budget.processes()
    log.info(
        "%d worker processes: a budget of %.1f CPUs and %d MiB (PROCTOR_CPU_OVERSUBSCRIBE, "
        "PROCTOR_MEMORY_OVERSUBSCRIBE) at the default task size",
        count,
        budget.millicpus / 1000,
        budget.memory_mb,
    )
    return count


def share_of(record: EpisodeRecord, settings: Settings, worker: str) -> Share:
    limits = within_host(record.request.task.limits, settings)
    return Share(worker=worker, millicpus=millicpus(limits.cpus), memory_mb=limits.memory_mb)


def reserve(
    store: EpisodeStore,
    record: EpisodeRecord,
    *,
    settings: Settings,
    budget: HostBudget,
    worker: str,
    wait_s: float = defaults.RESERVE_WAIT_S,
) -> bool:
    """Take the episode's share of its host's budget, waiting in line while it is full
    (first come, first served); False when the episode ended meanwhile (cancelled). Raises
    `NoCapacity` after `wait_s`."""
    share = share_of(record, settings, worker)
    host = settings.host_id
    started = time.monotonic()
    shortest, longest = defaults.RESERVE_POLL_S
    looked = started
    taken = False
    try:
        while not store.reserve(host, record.id, share, budget=budget.as_tuple()):
            now = time.monotonic()
            if now - started >= wait_s:
                raise NoCapacity(
                    f"this worker host's budget ({budget.millicpus / 1000:g} CPUs, "
                    f"{budget.memory_mb} MiB) stayed full for {wait_s:.0f} s"
                )
            if now - looked >= defaults.RESERVE_STATUS_S:
                looked = now
                status = store.status(record.id)
                if status is None or status.terminal:
                    return False
            # the nearer the head of the line, the more often: a share given back is taken
            # at once, and the next in line is awake to take the one after
            ahead = store.ahead_in_line(host, record.id)
            time.sleep(min(shortest * (1 + (ahead or 0)), longest))
        taken = True
    finally:
        if not taken:  # cancelled, waited too long, or Redis failed: out of the line
            with contextlib.suppress(RedisError):
                store.leave_line(host, record.id)
    waited = time.monotonic() - started
    if waited > longest:
        log.info("episode %s: waited %.1f s for its share of the host's budget", record.id, waited)
    return True


def release(store: EpisodeStore, host: str, episode_id: str) -> None:
    """Give the share back; should Redis not answer, the janitor gives it back later."""
    try:
        store.release(host, episode_id)
    except RedisError as exc:
        log.warning("episode %s: could not give its share back yet: %s", episode_id, exc)
