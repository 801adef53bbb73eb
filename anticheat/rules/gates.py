"""Which rules of the table can fire on one action, from the sources their evidence needs.

A rule that declares its sources (`Rule.needs`: Facts fields such as `net` or
`script.loops`; `Rule.names`: command names) returns None when all of them are empty, so
`screen` calls only the rules whose sources this action has, in table order. Most actions
have few sources (one or two commands, a file or two, no network), and the per-rule cost
of deciding that one by one was most of the table's cost; here it is a lookup of the
action's sources, memoised by the sources present.
"""

from __future__ import annotations

from collections.abc import Sequence

from anticheat.analysis.facts import Facts
from anticheat.rules.rule import Rule

__all__ = ["Gates"]

_MAX_PLANS = 4096  # distinct combinations of sources remembered (a few dozen occur)


class Gates:
    def __init__(self, rules: Sequence[Rule]) -> None:
        self._rules = tuple(rules)
        self._always = frozenset(i for i, r in enumerate(self._rules) if not r.gated)
        needs = sorted({n for r in self._rules for n in r.needs})
        self._needs = tuple(
            (tuple(n.split(".")), frozenset(i for i, r in enumerate(self._rules) if n in r.needs))
            for n in needs
        )
        # (field, its sub-field or "", bit): `python` or `script.loops`, nothing deeper
        self._paths = tuple(
            (path[0], ".".join(path[1:]), 1 << bit) for bit, (path, _) in enumerate(self._needs)
        )
        assert all(len(path) <= 2 for path, _ in self._needs), "needs are one or two deep"
        self._by_name: dict[str, frozenset[int]] = {}
        for i, r in enumerate(self._rules):
            for name in r.names or ():
                self._by_name[name] = self._by_name.get(name, frozenset()) | {i}
        self._plans: dict[tuple[int, frozenset[str]], tuple[Rule, ...]] = {}

    def rules_for(self, facts: Facts) -> tuple[Rule, ...]:
        """The rules that may fire on `facts`, in table order."""
        mask = 0
        for field, sub, bit in self._paths:
            value = getattr(facts, field)
            if sub and value is not None:
                value = getattr(value, sub)
            if value:
                mask |= bit
        by_name = self._by_name
        names = frozenset(c.name for c in facts.commands if c.name in by_name)
        key = (mask, names)
        plan = self._plans.get(key)
        if plan is None:
            chosen = set(self._always)
            for bit, (_, indices) in enumerate(self._needs):
                if mask >> bit & 1:
                    chosen |= indices
            for name in names:
                chosen |= by_name[name]
            plan = tuple(self._rules[i] for i in sorted(chosen))
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return plan
