"""Stage 1b of screening: the rules, one module per rule-id prefix, in one table.
Entry point: `anticheat.rules.registry.RULES` (re-exported here)."""

from anticheat.rules.registry import RULES, RULES_BY_ID
from anticheat.rules.rule import Category, Rule

__all__ = ["RULES", "RULES_BY_ID", "Category", "Rule"]
