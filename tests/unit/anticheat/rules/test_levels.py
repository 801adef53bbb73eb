"""Every rule's level follows the stated rule (anticheat/README.md, "Levels"): a hit that
structure answers is an attempt, one that acts on the grade is a cheat. Checked on each
rule's own cheats (tests/unit/anticheat/cases.py), not on its declaration alone."""

from __future__ import annotations

import pytest

from anticheat.analysis.facts import analyze
from anticheat.response.replay import ResponseContext, respond
from anticheat.rules import RULES
from anticheat.rules.rule import Answer, Category, Fallback, Rule
from proctor.models import Decision, Level, Observation, ScreenVerdict
from tests.unit.anticheat.cases import RULE_CASES, Action, task_for

SEALED = "<printed by the sealed repository>"
CHANGES = frozenset({"write", "append", "modify", "delete"})


def _text(action: Action) -> str:
    return getattr(action, "command", None) or getattr(action, "content", "")


def _answer(rule: Rule, action: Action) -> Observation:
    verdict = ScreenVerdict(
        decision=Decision.intercept, rule=rule.id, category=rule.category, reason=rule.id
    )
    context = ResponseContext(
        task=task_for(rule.id, action), run_sanitized=lambda _: Observation(output=SEALED)
    )
    return respond(action, verdict, context=context)


ANSWERED = [(r, a) for r in RULES if r.answer is not None for a in RULE_CASES[r.id][0]]
ACTING = [(r, a) for r in RULES if r.answer is None for a in RULE_CASES[r.id][0]]


def test_the_table_holds_both_levels_and_states_them_once() -> None:
    levels = {r.id: r.level for r in RULES}
    assert all(levels[r.id] is (Level.cheat if r.answer is None else Level.attempt) for r in RULES)
    # every history and network rule is answered by the seal or the honeypot
    for rule in RULES:
        if rule.category is Category.vcs_history:
            assert rule.answer is Answer.sealed_history, rule.id
        if rule.category is Category.network_fetch:
            assert rule.answer is Answer.honeypot, rule.id
        if rule.category in (Category.test_tampering, Category.grader_tampering):
            assert rule.level is Level.cheat, rule.id


@pytest.mark.parametrize(
    ("rule", "action"), ANSWERED, ids=[f"{r.id}:{_text(a)[:40]}" for r, a in ANSWERED]
)
def test_an_attempt_is_answered_with_nothing_the_task_withholds(rule: Rule, action: Action) -> None:
    """What the agent gets back is what the sealed repository printed, or a clean
    environment's failure (stderr), or its own literal text replayed (`echo`): no byte of it
    comes from past the seal, the network, the grader or another process."""
    answer = _answer(rule, action)
    printed = answer.output.strip()
    assert printed in ("", SEALED) or printed in _text(action), (rule.id, answer)
    if rule.answer is Answer.sealed_history:
        assert printed in ("", SEALED), answer
    if rule.answer in (Answer.honeypot, Answer.absent, Answer.clean_machine):
        assert answer.exit_code != 0 or printed == "" or printed in _text(action), answer


@pytest.mark.parametrize(
    ("rule", "action"), ACTING, ids=[f"{r.id}:{_text(a)[:40]}" for r, a in ACTING]
)
def test_a_cheat_acts_on_the_grade(rule: Rule, action: Action) -> None:
    """No structure answers these: each cheat the rule is for changes a file that grading
    reads or runs (tests, their configuration, the runner, the solution's own code), so it
    works by being there, answered or not (a one-shot solution runs as sent). The evasion
    rules are reviews of what the screen could not read: only a judge's verdict makes them
    anything (with none, an attempt or on record: tests/unit/workers/test_review_fallback.py)."""
    if rule.category is Category.evasion:
        assert rule.decision is Decision.review
        return
    changes = [op for op in analyze(action).files if op.kind in CHANGES]
    assert changes, f"{rule.id} is a cheat but its case changes no file: {_text(action)[:80]}"


def test_only_reviews_that_ask_for_nothing_fall_back_to_the_record() -> None:
    """`record` (no judge: on record, no cost) is for an unknown host the honeypot answers
    and for what the screen could not read; every other review is an attempt with no judge,
    and a decoded or dynamic exec, which the agent chose, stays one."""
    recorded = {r.id for r in RULES if r.fallback is Fallback.record}
    assert recorded == {"net.external", "evasion.unparseable", "evasion.screening-limit"}
    assert all(r.decision is Decision.review for r in RULES if r.id in recorded)
