"""A rule's gate (`Rule.needs`, `Rule.names`) only skips matchers that would find nothing.

`screen` does not call a matcher when every source of its evidence is empty. Both halves
of that promise are checked on every test case and, when present, the labelled dev set:
emptying a gated rule's sources makes its matcher return None, and screening finds exactly
the hits that calling every matcher finds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from anticheat.analysis.facts import Facts, analyze
from anticheat.context import Ctx
from anticheat.rules import RULES, Rule
from anticheat.screen import screen_detailed
from proctor.models import ScreenItem, TaskContext
from tests.unit.anticheat.cases import LEGIT, RULE_CASES, Action, task_for

DATA = Path(__file__).resolve().parents[4].parent / "shared" / "data" / "cheats-dev.jsonl"


def _corpus() -> Iterator[tuple[Action, TaskContext | None]]:
    for rule_id, (cheats, legit) in RULE_CASES.items():
        for action in cheats + legit:
            yield action, task_for(rule_id, action)
    yield from LEGIT
    if DATA.exists():
        for line in DATA.read_text().splitlines():
            if line.strip():
                item = ScreenItem.model_validate(json.loads(line))
                yield item.action, item.task


CORPUS = list(_corpus())
GATED = [r for r in RULES if r.gated]


def _without_sources(facts: Facts, rule: Rule) -> Facts:
    """`facts` with every source `rule` reads emptied (and the rest as it was)."""
    out = dataclasses.replace(facts)
    for need in rule.needs:
        head, _, field = need.partition(".")
        if field:
            inner = getattr(out, head)
            if inner is not None:
                setattr(
                    out, head, dataclasses.replace(inner, **{field: type(getattr(inner, field))()})
                )
        else:
            setattr(out, head, type(getattr(out, head))())
    if rule.names is not None:
        out.commands = [c for c in out.commands if c.name not in rule.names]
    return out


def test_gated_rules_exist() -> None:
    assert len(GATED) >= 20


@pytest.mark.parametrize("rule", GATED, ids=[r.id for r in GATED])
def test_matcher_finds_nothing_without_its_sources(rule: Rule) -> None:
    fired = 0
    for action, task in CORPUS:
        facts = analyze(action)
        fired += rule.matcher(Ctx(facts, task or TaskContext())) is not None
        emptied = _without_sources(facts, rule)
        evidence = rule.matcher(Ctx(emptied, task or TaskContext()))
        assert evidence is None, f"{rule.id} fired without its sources on {action!r}: {evidence}"
    assert fired, f"{rule.id} never fires on the corpus: the check above proves nothing"


def test_screening_finds_what_every_matcher_finds() -> None:
    for action, task in CORPUS:
        found = screen_detailed(action, task)
        ctx = Ctx(analyze(action), task or TaskContext())
        expected = [(r.id, e) for r in RULES if (e := r.matcher(ctx)) is not None]
        assert [(h.rule.id, h.evidence) for h in found.hits] == expected, action
