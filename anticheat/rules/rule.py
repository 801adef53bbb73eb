"""A rule as data: an id, a category, a description, a decision, a matcher, and what
structure answers a hit with (`answer`, which fixes the rule's `level`).

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
from proctor.models import CheatCategory, Decision, Level

__all__ = ["Answer", "Category", "Fallback", "Level", "Rule"]

Category = CheatCategory  # the wire's enum: a verdict's category is a rule's


class Fallback(StrEnum):
    """What a `review` comes to when no judge gives a verdict (none configured, down, over
    budget, or switched off by the task): never a silent allow, never a cheat (only a
    judge's verdict confirms more). `run` and `oracle` record the review as an attempt;
    `record` only notes it on its step, at no cost: a rule whose hit is no ask for anything
    the task withholds (an unknown host the honeypot answers; what the screen itself could
    not read), where structure holds whatever ran."""

    run = "run"  # it runs, and the step records the unresolved review as an attempt
    oracle = "oracle"  # it is intercepted and answered as a clean, sealed sandbox would
    record = "record"  # it runs, and the step notes the unresolved review: on record only


class Answer(StrEnum):
    """What structure answers a hit with, whatever the screen did: the sandbox is built so
    that this is all the action can get (anticheat/README.md, "Levels")."""

    sealed_history = "sealed_history"  # the sealed repository: the base commit's past only
    honeypot = "honeypot"  # no route out: a resolver failure, or the honeypot's fake page
    absent = "absent"  # hidden tests and grader are not in the sandbox while the agent acts
    clean_machine = "clean_machine"  # no secrets, no grader process: a plain machine answers
    # the sandbox's limits (memory, pids, disk, time) and lock-down (read-only root, no
    # capabilities, its own pid namespace): exhaustion is its typed verdict, never a cheat
    limits = "limits"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    category: Category
    description: str
    decision: Decision
    matcher: Matcher
    fallback: Fallback = Fallback.run
    # what structure answers a hit with; None: nothing does — the rule matches what acts on
    # the grade (tests, grader, runner, equality, early exit, code that reads the tests)
    answer: Answer | None = None
    # Facts fields (`net`, `python`, `script.loops` …) the evidence is read from; empty: any
    needs: tuple[str, ...] = ()
    # command names (`Command.name`) the evidence is read from, as an alternative source
    names: frozenset[str] | None = None

    @property
    def gated(self) -> bool:
        return bool(self.needs) or self.names is not None

    @property
    def level(self) -> Level:
        """The rule for choosing a level, stated once: a hit structure answers (nothing the
        task withholds can come back) is an attempt; one that acts on the grade is a cheat."""
        return Level.attempt if self.answer is not None else Level.cheat
