"""A rule as data: an id, a category, a description, a decision and a matcher.

The matcher reads the parsed facts of one action (never its raw text) and returns the
evidence it saw, or None. The id's prefix (`vcs.`, `net.`, …) names the module of
`anticheat.rules` that holds the rule and its matcher.
"""

from __future__ import annotations

from dataclasses import dataclass

from anticheat.context import Matcher
from proctor.models import CheatCategory, Decision

__all__ = ["Category", "Rule"]

Category = CheatCategory  # the wire's enum: a verdict's category is a rule's


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    category: Category
    description: str
    decision: Decision
    matcher: Matcher
