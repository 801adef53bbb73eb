"""Sealed repositories in a real Redis: kept by reference, renewed by use, expiring, capped
(an oversize copy is marked, not kept), one sealer at a time."""

from __future__ import annotations

import redis

from core.repos import RepoStore, SealedRepo, baked_ref, upload_ref

SEALED = SealedRepo(archive=b"\x1f\x8b sealed", base_commit="a" * 40, branch="main")


def test_a_kept_repository_is_read_back_and_renewed(redis_client: redis.Redis) -> None:
    store = RepoStore(redis_client, ttl_s=100, max_bytes=1 << 20)
    ref = upload_ref("d" * 64, "a" * 40, "main")
    assert store.get(ref) is None and store.describe(ref) is None
    assert store.put(ref, SEALED)
    assert store.get(ref) == SEALED
    info = store.describe(ref)
    assert info is not None and (info.base_commit, info.size) == ("a" * 40, len(SEALED.archive))
    key = "proctor:repo:" + ref.removeprefix("sha256:")
    redis_client.expire(key, 5)
    store.describe(ref)  # a use renews it
    assert redis_client.ttl(key) > 50


def test_an_oversize_copy_is_marked_not_kept(redis_client: redis.Redis) -> None:
    store = RepoStore(redis_client, ttl_s=100, max_bytes=4)
    ref = baked_ref("sha256:" + "e" * 64, "/testbed", "a" * 40)
    assert not store.put(ref, SEALED)
    assert store.get(ref) is None and store.describe(ref) is None
    assert store.oversize(ref)


def test_one_sealer_at_a_time(redis_client: redis.Redis) -> None:
    store = RepoStore(redis_client, ttl_s=100, max_bytes=1 << 20)
    ref = baked_ref("sha256:" + "f" * 64, "/testbed", "b" * 40)
    assert store.claim_sealing(ref, hold_s=30)
    assert not store.claim_sealing(ref, hold_s=30) and store.sealing(ref)
    store.release_sealing(ref)
    assert not store.sealing(ref) and store.claim_sealing(ref, hold_s=30)


def test_references_differ_by_what_they_seal() -> None:
    assert upload_ref("d" * 64, "A" * 40, "main") == upload_ref("d" * 64, "a" * 40, "main")
    assert upload_ref("d" * 64, "a" * 40, "main") != upload_ref("d" * 64, "a" * 40, "dev")
    assert baked_ref("x", "/testbed", "a" * 7) != baked_ref("y", "/testbed", "a" * 7)
