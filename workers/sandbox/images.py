"""Task images by reference on one host: pulled on first use, once, and kept within a budget.

However many episodes (in however many worker processes of the host) ask for an image at
once, one pulls it: the one that takes the host's pull lock in Redis; the others wait for
it, up to the same bound (`PROCTOR_PULL_TIMEOUT_S`), and pull themselves only if it failed
for a reason of its own. Each use puts the image last in the host's least-recently-used
order; after a pull, the oldest are removed until the pulled ones fit the disk budget
(`PROCTOR_IMAGE_CACHE_GB`) — never an image of the deployment's own (`PROCTOR_IMAGES`), never
one a container (running or not) uses.

A reference the registry says does not exist is the task's fault (`ImageNotInRegistry`):
it is remembered for a while so the API refuses it (422) instead of queueing it again.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterable

import redis

from core import keys
from core.task_images import digest, mark_missing, missing_reason
from workers.sandbox.docker import Engine, ImageNotInRegistry, PullFailed

log = logging.getLogger(__name__)

WAIT_STEP_S = 0.25  # how often a waiting worker looks whether the pull ended
LOCK_MARGIN_S = 30.0  # the lock outlives its holder's bound by this (then it expires)
# an image used this recently is never removed: another process of the host may have
# pulled or found it a moment ago and not have made its sandbox yet
EVICT_GRACE_S = 120.0
GB = 1 << 30

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class TaskImages:
    """The pull cache of one worker process (its state is the host's, in Redis)."""

    def __init__(
        self,
        engine: Engine,
        client: redis.Redis,
        *,
        host: str,
        keep: Iterable[str],
        timeout_s: float,
        budget_gb: float,
        grace_s: float = EVICT_GRACE_S,
    ) -> None:
        self.engine = engine
        self.redis = client
        self.host = host
        self.keep = frozenset(keep)
        self.timeout_s = timeout_s
        self.budget_bytes = int(budget_gb * GB)
        self.grace_s = grace_s

    def ensure(self, image: str) -> bool:
        """Make `image` present on this host (True: it was pulled for this call); raises
        ImageNotInRegistry (the task's fault) or PullFailed (ours)."""
        deadline = time.monotonic() + self.timeout_s
        lock = keys.image_pull(digest(self.host, image))
        while True:
            if self.engine.image_info(image) is not None:
                self.touch(image)
                return False
            why = missing_reason(self.redis, image)
            if why is not None:
                raise ImageNotInRegistry(why)
            left = deadline - time.monotonic()
            if left <= 0:
                raise PullFailed(
                    f"pull {image}: not on this host after {self.timeout_s:g} s "
                    "(another worker of the host was pulling it)"
                )
            token = secrets.token_hex(8)
            if self.redis.set(lock, token, nx=True, px=int((left + LOCK_MARGIN_S) * 1000)):
                try:
                    self._pull(image, timeout_s=left)
                finally:
                    self.redis.eval(_RELEASE, 1, lock, token)
                self.touch(image)
                self.evict(spare=image)
                return True
            time.sleep(WAIT_STEP_S)

    def _pull(self, image: str, *, timeout_s: float) -> None:
        started = time.monotonic()
        log.info("host %s: pulling %s", self.host, image)
        try:
            self.engine.pull(image, timeout_s=timeout_s)
        except ImageNotInRegistry as exc:
            mark_missing(self.redis, image, str(exc))
            raise
        self.redis.hincrby(keys.image_pulls(self.host), image, 1)
        log.info("host %s: pulled %s in %.1f s", self.host, image, time.monotonic() - started)

    def touch(self, image: str) -> None:
        """`image` was used now: last in line for eviction."""
        self.redis.zadd(keys.images_used(self.host), {image: time.time()})

    def pulls(self, image: str) -> int:
        """How many times `image` was pulled on this host."""
        return int(self.redis.hget(keys.image_pulls(self.host), image) or 0)

    def evict(self, *, spare: str = "") -> list[str]:
        """Remove the least recently used pulled images until the rest fit the budget
        (never `spare`, the image just pulled for an episode); the removed ones, oldest
        first."""
        used = keys.images_used(self.host)
        entries: list[tuple[bytes | str, float]] = list(
            self.redis.zrange(used, 0, -1, withscores=True)  # type: ignore[arg-type]
        )
        line = [m.decode() if isinstance(m, bytes) else m for m, _ in entries]
        recent = time.time() - self.grace_s
        fresh = {name for name, (_, at) in zip(line, entries, strict=True) if at > recent}
        sizes: dict[str, tuple[str, int]] = {}  # reference → (image id, size)
        for image in line:
            info = self.engine.image_info(image)
            if info is None:  # removed by hand, or by another worker's eviction
                self.redis.zrem(used, image)
                continue
            sizes[image] = (str(info["Id"]), int(info.get("Size") or 0))
        kept_ids = {
            str(info["Id"]) for info in map(self.engine.image_info, self.keep) if info is not None
        }
        counted: dict[str, int] = {}  # one size per image id, however many names it has
        for image_id, size in sizes.values():
            if image_id not in kept_ids:
                counted[image_id] = size
        total = sum(counted.values())
        if total <= self.budget_bytes:
            return []
        in_use = self.engine.images_in_use()
        removed = []
        for image in line:  # oldest first
            if total <= self.budget_bytes:
                break
            if image not in sizes or image in self.keep or image == spare or image in fresh:
                continue
            image_id, _ = sizes[image]
            if image_id in kept_ids or image_id in in_use:
                continue
            if self.engine.remove_image(image):
                self.redis.zrem(used, image)
                sizes.pop(image)
                if all(other != image_id for other, _ in sizes.values()):
                    total -= counted.pop(image_id, 0)
                removed.append(image)
                log.info("host %s: removed %s (least recently used)", self.host, image)
        return removed
