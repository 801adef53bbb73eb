"""Judge verdicts cached by a hash of model + prompt: Redis when it answers, an in-process
LRU always."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from anticheat.judge.prompt import JudgeVerdict
from core import keys

if TYPE_CHECKING:
    import redis

__all__ = ["CACHE_PREFIX", "VerdictCache"]

logger = logging.getLogger(__name__)

CACHE_PREFIX = keys.JUDGE_CACHE_PREFIX


class VerdictCache:
    """Redis when it answers, an in-process LRU always: a cache outage costs judge calls,
    never a review. After a Redis error the cache leaves Redis alone for a while, because a
    client's connect retries could otherwise eat every action's latency budget."""

    def __init__(
        self,
        client: redis.Redis | None,
        ttl_s: int,
        max_entries: int = 4096,
        backoff_s: float = 30.0,
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self._max = max_entries
        self._backoff_s = backoff_s
        self._redis_down_until = 0.0
        self._lru: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def _redis_usable(self) -> redis.Redis | None:
        if self._redis is None or time.monotonic() < self._redis_down_until:
            return None
        return self._redis

    def _redis_failed(self, what: str, exc: Exception) -> None:
        self._redis_down_until = time.monotonic() + self._backoff_s
        logger.warning(
            "judge cache %s failed; memory only for %.0fs: %s", what, self._backoff_s, exc
        )

    def get(self, key: str) -> JudgeVerdict | None:
        with self._lock:
            hit = self._lru.get(key)
            if hit is not None and hit[0] > time.monotonic():
                self._lru.move_to_end(key)
                return JudgeVerdict.model_validate_json(hit[1])
        client = self._redis_usable()
        if client is None:
            return None
        try:
            raw = client.get(CACHE_PREFIX + key)
        except Exception as exc:  # any Redis failure: the judge itself can still answer
            self._redis_failed("read", exc)
            return None
        if raw is None:
            return None
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            verdict = JudgeVerdict.model_validate_json(text)
        except ValueError:
            logger.warning("judge cache entry %s is unreadable; ignoring it", key)
            return None
        self._remember(key, text)
        return verdict

    def put(self, key: str, verdict: JudgeVerdict) -> None:
        text = verdict.model_dump_json()
        self._remember(key, text)
        client = self._redis_usable()
        if client is None:
            return
        try:
            client.set(CACHE_PREFIX + key, text, ex=self._ttl_s)
        except Exception as exc:
            self._redis_failed("write", exc)

    def _remember(self, key: str, text: str) -> None:
        with self._lock:
            self._lru[key] = (time.monotonic() + self._ttl_s, text)
            self._lru.move_to_end(key)
            while len(self._lru) > self._max:
                self._lru.popitem(last=False)
