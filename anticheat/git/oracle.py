"""A `GitOracle` for live episodes: asks git inside the sandbox whether a revision is fair.

The worker passes a function that runs an argv in the episode's container and returns
(exit code, stdout). A revision is fair when it resolves to the base commit or one of its
ancestors, or to a commit the agent made on top of the base (its own history, reachable
from HEAD); anything else that resolves (a ref or object the sanitization missed) is the
future. Answers are cached for the episode: the oracle is asked once per revision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["SandboxGitOracle"]

Run = Callable[[Sequence[str]], tuple[int, str]]
_SAFE = re.compile(r"^[\w./@{}~^:+-]{1,200}$")  # what a revision can look like; never an option


class SandboxGitOracle:
    def __init__(self, run: Run, base_commit: str) -> None:
        self._run = run
        self._base = base_commit
        self._cache: dict[str, bool | None] = {}

    def is_ancestor_of_base(self, rev: str) -> bool | None:
        if rev not in self._cache:
            self._cache[rev] = self._ask(rev)
        return self._cache[rev]

    def _ask(self, rev: str) -> bool | None:
        if not _SAFE.match(rev) or rev.startswith("-"):
            return None
        code, out = self._run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{object}}"])
        if code != 0 or not out.strip():
            return None  # does not resolve: a path, or nothing at all
        sha = out.strip().splitlines()[0]
        code, kind = self._run(["git", "cat-file", "-t", sha])
        if code != 0:
            return None
        if kind.strip() != "commit":
            # a tree or blob is fair when the base (or HEAD) reaches it
            listed = self._objects_reachable()
            return sha in listed if listed is not None else None
        if self._run(["git", "merge-base", "--is-ancestor", sha, self._base])[0] == 0:
            return True
        own = (
            self._run(["git", "merge-base", "--is-ancestor", self._base, sha])[0] == 0
            and self._run(["git", "merge-base", "--is-ancestor", sha, "HEAD"])[0] == 0
        )
        return own

    def _objects_reachable(self) -> set[str] | None:
        code, out = self._run(["git", "rev-list", "--objects", "HEAD", self._base])
        if code != 0:
            return None
        return {line.split(" ", 1)[0] for line in out.splitlines() if line}
