"""The sealed repository an interactive episode unpacks, whichever way the task gave it.

    inline (`archive`, `bundle`)   sealed by the API at submission: used as it is
    uploaded once (`ref`)          the sealed copy `POST /v1/repos` kept in Redis
    baked into the image (`path`)  read out of the image (a container created, never
                                   started), sealed here, kept in Redis per (image digest,
                                   path, base commit) for the next episode of the task

A baked repository reaches the agent exactly as an upload does: the sealed copy is unpacked
into the workspace, and the image's own copy at `path` is covered by a tmpfs of the
sandbox (`SandboxSpec.cover`) that holds only links into the workspace, so tools and
installs that name `path` (an editable install of `/testbed`) find the agent's tree and
nothing of the image's `.git` is readable.

Errors: `RepoUnusable` is the task's (no repository at that path, not at that commit, too
large): the episode ends `task_error` before the agent acts. Our own failures (Docker, git
missing, Redis) are `SandboxError`s: `infra_error`.
"""

from __future__ import annotations

import base64
import logging
import posixpath
import shlex
import tempfile
import time
from pathlib import Path

from anticheat.git.seal import (
    MAX_UNPACKED_BYTES,
    SealRefused,
    SealUnavailable,
    Source,
    seal_source,
)
from core.repos import RepoStore, SealedRepo, baked_ref
from proctor.models import RepoSnapshot, TaskSpec
from workers.runtime import Runtime
from workers.sandbox.docker import WORKSPACE, PathTooLarge, SandboxError

log = logging.getLogger(__name__)

__all__ = ["RepoUnusable", "link_script", "sealed_repo"]

SEAL_WAIT_S = 600  # the longest a worker waits for another to seal a repository
SEAL_POLL_S = 0.25


class RepoUnusable(Exception):
    """The task's repository cannot be used: the task's fault, said why."""


def repo_store(rt: Runtime) -> RepoStore:
    settings = rt.settings
    return RepoStore(
        rt.store.redis, ttl_s=settings.repo_ttl_s, max_bytes=settings.repo_max_mb << 20
    )


def sealed_repo(rt: Runtime, task: TaskSpec, *, episode_id: str) -> RepoSnapshot | None:
    """The task's repository as a sealed archive, ready to unpack; None: it has none."""
    repo = task.repo
    if repo is None:
        return None
    if repo.ref is not None:
        kept = repo_store(rt).get(repo.ref)
        if kept is None:  # the API renewed it at submission: it expired while queued
            raise SandboxError(
                f"the uploaded repository {repo.ref} expired before the episode started"
            )
        return _snapshot(kept)
    if repo.path is not None:
        return _baked(rt, task, repo, episode_id=episode_id)
    return repo  # sealed by the API


def _snapshot(kept: SealedRepo) -> RepoSnapshot:
    return RepoSnapshot(
        archive=base64.b64encode(kept.archive).decode("ascii"),
        base_commit=kept.base_commit,
        branch=kept.branch,
    )


def _baked(rt: Runtime, task: TaskSpec, repo: RepoSnapshot, *, episode_id: str) -> RepoSnapshot:
    assert repo.path is not None
    image = rt.spec_for(task).image
    ref = baked_ref(rt.engine.image_digest(image), repo.path, repo.base_commit)
    store = repo_store(rt)
    deadline = time.monotonic() + SEAL_WAIT_S
    while (kept := store.get(ref)) is None:
        if store.oversize(ref):  # never kept: each episode seals its own, at once
            return _seal_baked(rt, task, repo, image, ref, store, episode_id=episode_id)
        if store.claim_sealing(ref, hold_s=SEAL_WAIT_S):
            try:
                return _seal_baked(rt, task, repo, image, ref, store, episode_id=episode_id)
            finally:
                store.release_sealing(ref)
        if time.monotonic() > deadline:  # its holder is stuck: seal it here too
            return _seal_baked(rt, task, repo, image, ref, store, episode_id=episode_id)
        # another worker is sealing it (a batch samples a task many times at once)
        while store.describe(ref) is None and time.monotonic() < deadline:
            if not store.sealing(ref) or store.oversize(ref):
                break  # it gave up (its episode failed): claim it in turn
            time.sleep(SEAL_POLL_S)
    return _snapshot(kept)


def _seal_baked(
    rt: Runtime,
    task: TaskSpec,
    repo: RepoSnapshot,
    image: str,
    ref: str,
    store: RepoStore,
    *,
    episode_id: str,
) -> RepoSnapshot:
    assert repo.path is not None
    with tempfile.TemporaryDirectory(prefix="proctor-baked-") as tmp:
        tar = Path(tmp) / "path.tar"
        try:
            with tar.open("wb") as out:
                found = rt.engine.read_path(image, repo.path, out, max_bytes=MAX_UNPACKED_BYTES)
        except PathTooLarge as exc:
            raise RepoUnusable(str(exc)) from None
        if not found:
            raise RepoUnusable(f"the image {task.image} has nothing at {repo.path}")
        try:
            sealed = seal_source(
                Source(path=tar, root=posixpath.basename(repo.path), build_files=True),
                base_commit=repo.base_commit,
                branch=repo.branch,
            )
        except SealRefused as exc:
            raise RepoUnusable(f"{repo.path} in the image {task.image}: {exc}") from None
        except SealUnavailable as exc:
            raise SandboxError(f"repositories cannot be sealed here: {exc}") from exc
    assert sealed.archive is not None
    archive = base64.b64decode(sealed.archive)
    kept_now = store.put(ref, SealedRepo(archive, sealed.base_commit, sealed.branch))
    log.info(
        "episode %s: sealed %s of %s at %s as %s (%d KiB)%s",
        episode_id,
        repo.path,
        image,
        sealed.base_commit,
        ref,
        len(archive) >> 10,
        "" if kept_now else ", over PROCTOR_REPO_MAX_MB: not kept",
    )
    return sealed


def link_script(path: str) -> str:
    """Link each entry of the workspace (the sealed repository) into the covered `path`."""
    target = shlex.quote(path)
    return "\n".join(
        [
            "set -euo pipefail",
            f"cd {WORKSPACE}",
            "shopt -s dotglob nullglob",
            f'for entry in *; do ln -s "{WORKSPACE}/$entry" {target}/"$entry"; done',
        ]
    )
