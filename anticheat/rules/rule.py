"""A rule as data: an id, a category, a description, a decision and a matcher.

The matcher reads the parsed facts of one action (never its raw text) and returns the
evidence it saw, or None. The id's prefix (`vcs.`, `net.`, …) names the module of
`anticheat.rules` that holds the rule and its matcher.

A rule may say where its evidence can come from (`needs`, `names`): `screen` does not call
a matcher whose sources are all empty, which is most of them for most actions. This is a
promise about the matcher — it returns None whenever those sources are empty — that
tests/unit/anticheat/rules/test_gates.py checks on every action of the test cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from anticheat.context import Matcher
from proctor.models import CheatCategory, Decision

__all__ = ["Category", "Fallback", "Level", "Rule"]

Category = CheatCategory  # the wire's enum: a verdict's category is a rule's


class Fallback(StrEnum):
    """What a `review` comes to when no judge gives a verdict (none configured, down, over
    budget, or switched off by the task): never a silent allow."""

    run = "run"  # it runs, and the step records the unresolved review as an attempt
    oracle = "oracle"  # it is intercepted and answered as a clean, sealed sandbox would


class Level(StrEnum):
    """What a hit of the rule makes of the episode (the task policy can raise attempts)."""

    attempt = "attempt"  # structure made it harmless (nothing revealed): a step penalty only
    cheat = "cheat"  # it changed, or was meant to change, what the grader sees: `cheat`


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    category: Category
    description: str
    decision: Decision
    matcher: Matcher
    fallback: Fallback = Fallback.run
    level: Level = Level.cheat
    # Facts fields (`net`, `python`, `script.loops` …) the evidence is read from; empty: any
    needs: tuple[str, ...] = ()
    # command names (`Command.name`) the evidence is read from, as an alternative source
    names: frozenset[str] | None = None

    @property
    def gated(self) -> bool:
        return bool(self.needs) or self.names is not None
