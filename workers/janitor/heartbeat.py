"""A worker's heartbeat, and whether other workers' silence means anything yet.

Silence is judged only while Redis answers: after an outage everyone's heartbeats are old,
so a janitor judges no other worker until its own have gone through for a whole TTL.
"""

from __future__ import annotations

import logging
import threading
import time

from redis.exceptions import RedisError

from core.defaults import OUTAGE_BEATS
from core.store import EpisodeStore

log = logging.getLogger(__name__)


class Heartbeat:
    """This worker's beats (`beat_until`, a thread of its own) and the judging they allow."""

    def __init__(
        self, store: EpisodeStore, *, worker: str, host: str, every_s: float, ttl_s: float
    ) -> None:
        self.store = store
        self.worker = worker
        self.host = host
        self.heartbeat_s = every_s
        self.heartbeat_ttl_s = ttl_s
        # since when our heartbeats have gone through without a gap (see the docstring)
        self._answering_since = self._last_beat = time.time()

    def first(self) -> None:
        """The first beat, before the threads start: the worker is registered."""
        self.store.heartbeat(self.worker, host=self.host)
        self._answering_since = self._last_beat = time.time()

    def beat_until(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_s):
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
