"""A `GitOracle` for live episodes: asks git inside the sandbox whether a revision is fair.

The worker passes a function that runs an argv in the episode's container and returns
(exit code, stdout). The sandbox's repository is sealed (`seal.py`): it holds the base
commit's past and nothing else, so whatever resolves there is fair — the base history, or
the agent's own work on top of it (its commits, branches, tags, stash and reflog, even a
commit it reset away and recovers with `HEAD@{1}`). What does not resolve is a path, or,
when it is an object id, a commit the oracle knows is not the base's past: a sha learnt
from outside (an issue, a changelog, a `git log --all` elsewhere) is the future.
Answers are cached for the episode: the oracle is asked once per revision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["SandboxGitOracle", "names_an_object"]

Run = Callable[[Sequence[str]], tuple[int, str]]
_SAFE = re.compile(r"^[\w./@{}~^:+-]{1,200}$")  # what a revision can look like; never an option
# an object id, full or abbreviated far enough that it is not a word (`added`, `facade`)
_OBJECT_ID = re.compile(r"^(?=[0-9a-f]*\d)[0-9a-f]{7,64}$", re.IGNORECASE)


def names_an_object(rev: str) -> bool:
    """`rev` (navigation and `:path` suffixes aside) is an object id, not a name."""
    head = re.split(r"[~^:@]", rev, maxsplit=1)[0]
    return bool(_OBJECT_ID.match(head))


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
        if code == 0 and out.strip():
            return True  # the sealed repository holds only the base's past and the agent's work
        return False if names_an_object(rev) else None
