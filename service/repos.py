"""Repositories uploaded once: seal an upload and keep it (`POST /v1/repos`), and resolve the
references episodes name (`task.repo.ref`) at submission.

An upload is spooled to disk as it arrives (at most `PROCTOR_REPO_MAX_MB`), inflated with
its bounds (`anticheat.git.upload`), sealed (`anticheat.git.seal`) and kept in Redis under
its reference (`core.repos`). The same bytes at the same base commit and branch are the
same reference: uploaded again, they are not sealed again. A reference lives
`PROCTOR_REPO_TTL_S` (24 h by default) after its last use: its upload, each submission
naming it, each episode start unpacking it.
"""

from __future__ import annotations

import base64
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from anyio import to_thread

from anticheat.git.seal import SealRefused, SealUnavailable, seal_source
from anticheat.git.upload import Spool, UploadTooLarge
from core.repos import RepoInfo, RepoStore, SealedRepo, upload_ref
from proctor.models import EpisodeCreate, RepoCreated
from service.deps import Resources
from service.errors import BadRequest, NotFound, PayloadTooLarge, ServiceUnavailable

_BASE = re.compile(r"^[0-9a-fA-F]{7,64}$")
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]{1,100}$")


def repo_store(resources: Resources) -> RepoStore:
    settings = resources.settings
    return RepoStore(
        resources.redis, ttl_s=settings.repo_ttl_s, max_bytes=settings.repo_max_mb << 20
    )


async def upload(
    resources: Resources, body: AsyncIterator[bytes], *, base_commit: str, branch: str
) -> RepoCreated:
    """Seal an uploaded archive or bundle and keep it; its reference."""
    if not _BASE.match(base_commit):
        raise BadRequest("base_commit must be 7 to 64 hex digits")
    if not _BRANCH.match(branch):
        raise BadRequest("branch must be 1 to 100 of A-Z a-z 0-9 . _ / -")
    store = repo_store(resources)
    directory = Path(tempfile.mkdtemp(prefix="proctor-upload-"))
    try:
        spool = Spool(directory, max_bytes=store.max_bytes)
        try:
            async for chunk in body:
                spool.feed(chunk)
        except UploadTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from None
        ref = upload_ref(spool.digest, base_commit, branch)
        known = await to_thread.run_sync(store.describe, ref)
        if known is None:  # not uploaded before (or expired): seal it
            known = await to_thread.run_sync(_seal_and_keep, store, spool, ref, base_commit, branch)
    finally:
        await to_thread.run_sync(shutil.rmtree, directory, True)
    return RepoCreated(
        ref=ref,
        base_commit=known.base_commit,
        branch=known.branch,
        size=known.size,
        expires_in_s=store.ttl_s,
    )


def _seal_and_keep(
    store: RepoStore, spool: Spool, ref: str, base_commit: str, branch: str
) -> RepoInfo:
    try:
        sealed = seal_source(spool.inflate(), base_commit=base_commit, branch=branch)
    except SealRefused as exc:
        raise BadRequest(f"the repository cannot be sealed: {exc}") from None
    except SealUnavailable as exc:
        raise ServiceUnavailable(f"repositories cannot be sealed here: {exc}") from None
    assert sealed.archive is not None
    archive = base64.b64decode(sealed.archive)
    if not store.put(ref, SealedRepo(archive, sealed.base_commit, sealed.branch)):
        raise PayloadTooLarge(
            f"the sealed repository is {len(archive) >> 20} MiB, over {store.max_bytes >> 20} MiB"
        )
    return RepoInfo(base_commit=sealed.base_commit, branch=sealed.branch, size=len(archive))


def resolve_ref(resources: Resources, request: EpisodeCreate) -> EpisodeCreate:
    """The request with its repository reference checked (404: unknown or expired), its
    life renewed, and its base commit and branch filled in from the upload."""
    repo = request.task.repo
    if repo is None or repo.ref is None:
        return request
    known = repo_store(resources).describe(repo.ref)
    if known is None:
        raise NotFound(
            f"no repository {repo.ref} (unknown, or unused for longer than "
            f"{resources.settings.repo_ttl_s}s): upload it again with POST /v1/repos"
        )
    base = known.base_commit
    if repo.base_commit and not base.startswith(repo.base_commit.lower()):
        raise BadRequest(f"task.repo.base_commit {repo.base_commit} is not the upload's ({base})")
    filled = repo.model_copy(update={"base_commit": base, "branch": known.branch})
    task = request.task.model_copy(update={"repo": filled})
    return request.model_copy(update={"task": task})
