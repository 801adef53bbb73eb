"""What the API and the workers share about task images by reference: which ones their
registry said do not exist (a worker learns it pulling; the API refuses them, 422)."""

from __future__ import annotations

import hashlib

import redis

from core import keys
from core.defaults import IMAGE_MISSING_TTL_S


def digest(*parts: str) -> str:
    """A fixed-length key part for a reference (and a host)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def mark_missing(client: redis.Redis, image: str, why: str) -> None:
    client.set(keys.image_missing(digest(image)), why, ex=IMAGE_MISSING_TTL_S)


def missing_reason(client: redis.Redis, image: str) -> str | None:
    """Why the registry has no `image`, if a worker was told so lately."""
    raw = client.get(keys.image_missing(digest(image)))
    return raw.decode() if isinstance(raw, bytes) else raw
