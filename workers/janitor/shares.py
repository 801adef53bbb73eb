"""Giving back the shares of a host's budget (workers/capacity.py) that nobody else will: a
dead worker's (one off the registry at once, one only silent once silence is judged), and
this process's own whose episode ended without its job giving it back."""

from __future__ import annotations

import logging

from core.store import EpisodeStore
from workers.janitor.processes import alive_here

log = logging.getLogger(__name__)


class ShareReturns:
    """The shares of this host a sweep gives back."""

    def __init__(
        self,
        store: EpisodeStore,
        *,
        worker: str,
        host: str,
        heartbeat_ttl_s: float,
        holding: dict[str, str],
        busy: set[str],
    ) -> None:
        self.store = store
        self.worker = worker
        self.host = host
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.holding = holding  # see `Janitor`
        self.busy = busy

    def release(self, *, judging: bool) -> int:
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
        live |= {w for w in silent if alive_here(w, host=self.host)}
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
