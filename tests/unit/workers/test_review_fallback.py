"""A `review` no judge decided follows its rule's stated fallback, and says which."""

from __future__ import annotations

from anticheat.rules import RULES
from anticheat.rules.rule import Fallback
from anticheat.screen import screen
from proctor.models import BashAction, Decision, TaskContext
from workers.guard import review_fallback

REPO = TaskContext(kind="repo", base_commit="a1b2c3d4e5f6")


def test_every_review_rule_states_a_fallback() -> None:
    reviewed = [r for r in RULES if r.decision is Decision.review]
    assert reviewed and all(isinstance(r.fallback, Fallback) for r in reviewed)


def test_an_unresolved_revision_is_answered_from_the_oracle() -> None:
    verdict = screen(BashAction(command="git show 8f2e1d0:src/x.py"), REPO)
    assert verdict.decision is Decision.review and verdict.rule == "vcs.unresolved-revision"
    decided, how = review_fallback(verdict)
    assert decided.decision is Decision.intercept and decided.rule == verdict.rule
    assert "answering from the oracle" in how


def test_a_run_fallback_runs_and_says_it_is_an_attempt() -> None:
    rule = next(r for r in RULES if r.decision is Decision.review and r.fallback is Fallback.run)
    verdict = screen(BashAction(command="true"), REPO).model_copy(
        update={"decision": Decision.review, "rule": rule.id, "reason": f"{rule.id}: seen"}
    )
    decided, how = review_fallback(verdict)
    assert decided.decision is Decision.allow
    assert "recorded as an attempt" in how and rule.id in how


def test_a_record_fallback_runs_and_says_it_is_on_record_only() -> None:
    verdict = screen(BashAction(command="curl -I https://bpaste.net"), REPO)
    assert verdict.decision is Decision.review and verdict.rule == "net.external"
    decided, how = review_fallback(verdict)
    assert decided.decision is Decision.allow
    assert "on record only" in how and "attempt" not in how
