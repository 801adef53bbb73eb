"""What a rule matcher gets: the facts of one action, the task, and the git oracle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from anticheat.analysis.facts import Facts
from proctor.models import TaskContext

__all__ = ["Ctx", "GitOracle", "Matcher"]


class GitOracle(Protocol):
    """Answers, in a live episode, whether a revision is one the agent may see.

    `is_ancestor_of_base(rev)` is True when `rev` resolves to the base commit or one of
    its ancestors — or to a commit the agent itself made during the episode (its own
    history is not the future); False when it resolves to anything else; None when it
    does not resolve or the oracle cannot tell (the rule then decides by its shape).
    The worker implements it with `git rev-parse --verify` and `git merge-base
    --is-ancestor` inside the sandbox; it must not consult remotes.
    """

    def is_ancestor_of_base(self, rev: str) -> bool | None: ...


@dataclass(slots=True)
class Ctx:
    facts: Facts
    task: TaskContext
    git: GitOracle | None = None
    _memo: dict[str, object] = field(default_factory=dict)

    def once(self, key: str, compute: Callable[[], object]) -> object:
        """Share a derived result between the rules that need it (one screening)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


Matcher = Callable[[Ctx], str | None]
