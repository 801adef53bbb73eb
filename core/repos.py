"""Sealed repositories in Redis, by reference: uploaded once (`POST /v1/repos`) or read out
of a task image once per (image digest, path, base commit), then unpacked by every episode.

Redis, not a worker host's disk: every worker host already reaches it (an episode may start
on any host), no sandbox can write to it, and its keys expire on their own. A sealed
repository holds one base commit's history, compressed, so it is small beside the
episodes' records; `PROCTOR_REPO_MAX_MB` caps each, and each expires
`PROCTOR_REPO_TTL_S` after its last use (an upload, a submission naming it, an episode
unpacking it), so a reference a run keeps using never expires under it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import redis

from core import keys

__all__ = ["RepoInfo", "RepoStore", "SealedRepo", "baked_ref", "upload_ref"]


@dataclass(frozen=True, slots=True)
class SealedRepo:
    archive: bytes  # a tar.gz of the sealed repository: a work tree and its `.git`
    base_commit: str  # the full sha
    branch: str


@dataclass(frozen=True, slots=True)
class RepoInfo:
    base_commit: str
    branch: str
    size: int  # bytes of the sealed archive


def upload_ref(digest: str, base_commit: str, branch: str) -> str:
    """The reference of an upload: its bytes' SHA-256 with what it is sealed at."""
    text = f"upload\0{digest}\0{base_commit.lower()}\0{branch}"
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def baked_ref(image_digest: str, path: str, base_commit: str) -> str:
    """The reference of a repository sealed out of a task image."""
    text = f"image\0{image_digest}\0{path}\0{base_commit.lower()}"
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class RepoStore:
    def __init__(self, client: redis.Redis, *, ttl_s: int, max_bytes: int) -> None:
        self.redis = client
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes

    @staticmethod
    def _key(ref: str) -> str:
        return keys.repo(ref.removeprefix("sha256:"))

    def put(self, ref: str, sealed: SealedRepo) -> bool:
        """Keep `sealed` under `ref`; False when it is over the size cap: then only that is
        kept (`oversize`), so workers waiting for it seal their own copies at once."""
        key = self._key(ref)
        if len(sealed.archive) > self.max_bytes:
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(key, "oversize", len(sealed.archive))
            pipe.expire(key, self.ttl_s)
            pipe.execute()
            return False
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "archive": sealed.archive,
                "base": sealed.base_commit,
                "branch": sealed.branch,
            },
        )
        pipe.expire(key, self.ttl_s)
        pipe.execute()
        return True

    def describe(self, ref: str) -> RepoInfo | None:
        """What a kept repository is, its life renewed; None: unknown or expired."""
        key = self._key(ref)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(key, ["base", "branch"])
        pipe.hstrlen(key, "archive")
        pipe.expire(key, self.ttl_s)
        (base, branch), size, _ = pipe.execute()
        if base is None or branch is None or not size:
            return None
        return RepoInfo(base_commit=base.decode(), branch=branch.decode(), size=int(size))

    def oversize(self, ref: str) -> bool:
        """Whether `ref` was sealed and found over the size cap (so it is never kept)."""
        return bool(self.redis.hexists(self._key(ref), "oversize"))

    def claim_sealing(self, ref: str, *, hold_s: int) -> bool:
        """Whether the caller is the one to seal `ref` now (others wait for it to be kept);
        the claim lapses after `hold_s`, should its holder die."""
        key = keys.repo_sealing(ref.removeprefix("sha256:"))
        return bool(self.redis.set(key, "1", nx=True, ex=hold_s))

    def sealing(self, ref: str) -> bool:
        """Whether a worker holds the claim to seal `ref`."""
        return bool(self.redis.exists(keys.repo_sealing(ref.removeprefix("sha256:"))))

    def release_sealing(self, ref: str) -> None:
        self.redis.delete(keys.repo_sealing(ref.removeprefix("sha256:")))

    def get(self, ref: str) -> SealedRepo | None:
        """The kept repository, its life renewed; None: unknown or expired."""
        key = self._key(ref)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(key, ["archive", "base", "branch"])
        pipe.expire(key, self.ttl_s)
        (archive, base, branch), _ = pipe.execute()
        if archive is None or base is None or branch is None:
            return None
        return SealedRepo(archive=archive, base_commit=base.decode(), branch=branch.decode())
