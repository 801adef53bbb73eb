"""The Redis key schema: every key Proctor writes is named here, and nowhere else.

One constant or one function per key family; what each holds is the table at the top of
core/store/__init__.py (tests/unit/core/test_keys.py checks that the two agree). RQ's own keys
(`rq:…`) are RQ's: core/queues.py names the queues.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "proctor:"

# --- episodes
EPISODE_PREFIX: Final = PREFIX + "episode:"  # the Lua scripts build record keys from ids
ACTIVE: Final = PREFIX + "active"
QUEUED: Final = PREFIX + "queued"
EVENTS: Final = PREFIX + "events"
PACE: Final = PREFIX + "pace"

# --- metrics
VERDICTS: Final = PREFIX + "stats:verdict"
COUNTERS: Final = PREFIX + "stats:counters"

# --- the catalog of ended episodes (written by the finish script, read by service/catalog.py)
CATALOG: Final = PREFIX + "catalog:ended"
CATALOG_RULES: Final = PREFIX + "catalog:rules"
CATALOG_CATEGORIES: Final = PREFIX + "catalog:categories"

# --- workers
WORKERS: Final = PREFIX + "workers"
WORKER_HOSTS: Final = PREFIX + "worker-hosts"
WORKER_PROBLEMS: Final = PREFIX + "worker-problems"
WORKER_IMAGES: Final = PREFIX + "worker-images"

# --- a host's capacity


def reservations(host: str) -> str:
    """The budget a worker host's running episodes hold (hash: episode id → its share)."""
    return f"{PREFIX}reservations:{host}"


def waiting(host: str) -> str:
    """The episodes waiting for a share of a host's budget, in line (sorted set by arrival)."""
    return f"{PREFIX}waiting:{host}"


def waiting_asked(host: str) -> str:
    """When each waiting episode last asked for its share (hash: episode id → time)."""
    return f"{PREFIX}waiting-asked:{host}"


# --- task images by reference (workers/sandbox/images.py, service/prefetch.py)


def images_used(host: str) -> str:
    """The task images pulled on a host, by when an episode last used them (zset)."""
    return f"{PREFIX}images-used:{host}"


def image_pulls(host: str) -> str:
    """How many times each task image was pulled on a host (hash: reference → count)."""
    return f"{PREFIX}image-pulls:{host}"


def image_pull(digest: str) -> str:
    """Held while one worker of a host pulls one image (digest: of host and reference)."""
    return f"{PREFIX}image-pull:{digest}"


def image_missing(digest: str) -> str:
    """A reference its registry said does not exist (digest: of the reference)."""
    return f"{PREFIX}image-missing:{digest}"


def prefetch(prefetch_id: str) -> str:
    """A prefetch's request and progress (hash)."""
    return f"{PREFIX}prefetch:{prefetch_id}"


# --- the judge
JUDGE_CACHE_PREFIX: Final = PREFIX + "judge:"
JUDGE_CALIBRATION: Final = PREFIX + "judge-calibration"  # the last calibration's finding
JUDGE_CALIBRATION_LOCK: Final = PREFIX + "judge-calibration-lock"  # one process calibrates


def episode(episode_id: str) -> str:
    """An episode's record (hash)."""
    return EPISODE_PREFIX + episode_id


def steps(episode_id: str) -> str:
    """An interactive episode's steps (list, oldest first)."""
    return f"{PREFIX}steps:{episode_id}"


def acting(episode_id: str) -> str:
    """Held while an interactive episode runs an action (one at a time)."""
    return f"{PREFIX}acting:{episode_id}"


def dedup(digest: str) -> str:
    """The episode of an identical one-shot request (by the SHA-256 of its content)."""
    return f"{PREFIX}dedup:{digest}"


def repo(digest: str) -> str:
    """A sealed repository (an upload's, or one read out of a task image), by its reference."""
    return f"{PREFIX}repo:{digest}"


def repo_sealing(digest: str) -> str:
    """Held by the worker sealing a repository read out of an image (one at a time)."""
    return f"{PREFIX}repo-sealing:{digest}"


def reply(token: str) -> str:
    """Where a worker pushes its answer to one request the API blocks on."""
    return f"{PREFIX}reply:{token}"


def latency(metric: str) -> str:
    """A latency histogram (total, queued, run, sandbox_start)."""
    return f"{PREFIX}stats:latency:{metric}"


def catalog_term(term: str) -> str:
    """Ended episodes with one verdict, mode or metadata pair (zset: id → end time)."""
    return f"{PREFIX}catalog:by:{term}"


def catalog_minute(minute: str) -> str:
    """What ended in one minute (hash: counts by verdict and category, latency buckets)."""
    return f"{PREFIX}catalog:minute:{minute}"


def catalog_scratch(token: str) -> str:
    """An intersection a count builds and deletes in one MULTI (zset)."""
    return f"{PREFIX}catalog:scratch:{token}"


def judge_cache(digest: str) -> str:
    """A cached judge verdict, by the hash of what was judged."""
    return JUDGE_CACHE_PREFIX + digest
