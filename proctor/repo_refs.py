"""Inline repositories sent once: the clients upload each distinct one (`POST /v1/repos`) the
first time an episode carries it, and send its reference from then on.

A run that samples one task 512 times then uploads and seals its repository once, not 512
times. The reference is remembered per client (a run), by the upload's content, base
commit and branch; a service without `/v1/repos` (404) gets the repository inline, as
before.
"""

from __future__ import annotations

import base64
import hashlib

from proctor.models import EpisodeCreate, RepoSnapshot

__all__ = ["RepoRefs"]

UPLOAD_PATH = "/v1/repos"


class RepoRefs:
    """What one client has uploaded: content key → reference."""

    def __init__(self) -> None:
        self.refs: dict[str, str] = {}
        self.supported = True  # False once the service said it has no `/v1/repos`

    @staticmethod
    def key(repo: RepoSnapshot) -> str | None:
        """The content key of an inline repository; None: it is not inline."""
        data = repo.archive if repo.archive is not None else repo.bundle
        if data is None:
            return None
        text = "\0".join((data, repo.base_commit.lower(), repo.branch))
        return hashlib.sha256(text.encode()).hexdigest()

    def pending(self, episodes: list[EpisodeCreate]) -> dict[str, RepoSnapshot]:
        """The inline repositories not uploaded yet, by key (each once)."""
        if not self.supported:
            return {}
        out: dict[str, RepoSnapshot] = {}
        for episode in episodes:
            repo = episode.task.repo
            key = self.key(repo) if repo is not None else None
            if key is not None and key not in self.refs:
                out.setdefault(key, repo)  # type: ignore[arg-type]
        return out

    def swap(self, episode: EpisodeCreate) -> EpisodeCreate:
        """The episode with its inline repository replaced by its reference, when known."""
        repo = episode.task.repo
        key = self.key(repo) if repo is not None else None
        if repo is None or key is None or key not in self.refs:
            return episode
        by_ref = RepoSnapshot(ref=self.refs[key], base_commit=repo.base_commit, branch=repo.branch)
        return episode.model_copy(update={"task": episode.task.model_copy(update={"repo": by_ref})})


def upload_body(repo: RepoSnapshot) -> tuple[bytes, dict[str, str]]:
    """The raw bytes and query of an inline repository's upload."""
    data = repo.archive if repo.archive is not None else repo.bundle
    assert data is not None
    return base64.b64decode(data), {"base_commit": repo.base_commit, "branch": repo.branch}
