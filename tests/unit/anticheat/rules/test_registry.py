"""Every rule fires on its cheats and stays quiet on its look-alikes."""

from __future__ import annotations

import pytest

from anticheat.rules import RULES, RULES_BY_ID, Category
from anticheat.screen import screen, screen_detailed
from proctor.models import Decision, TaskContext, WriteFileAction
from tests.unit.anticheat.cases import CONTEXT_CASES, LEGIT, REPO, RULE_CASES, Action, task_for


def _label(action: Action) -> str:
    text = getattr(action, "command", None) or getattr(action, "path", "")
    return text[:60].replace("\n", "\\n")


def _fired(rule_id: str, action: Action) -> list[str]:
    return [hit.rule.id for hit in screen_detailed(action, task_for(rule_id, action)).hits]


CHEATS = [(rid, a) for rid, (cheats, _) in RULE_CASES.items() for a in cheats]
LOOKALIKES = [(rid, a) for rid, (_, legit) in RULE_CASES.items() for a in legit]


def test_every_rule_has_cheats_and_lookalikes() -> None:
    for rule in RULES:
        cheats, legit = RULE_CASES.get(rule.id, ([], []))
        assert cheats and legit, f"{rule.id} needs at least one cheat and one look-alike"


def test_rules_are_data() -> None:
    assert len(RULES_BY_ID) == len(RULES)
    required = {
        "vcs_history",
        "network_fetch",
        "eval_artifact_read",
        "test_tampering",
        "grader_tampering",
        "harness_detection",
        "resource_abuse",
    }
    assert required <= {str(r.category) for r in RULES}
    for rule in RULES:
        assert rule.id == rule.id.lower() and "." in rule.id
        assert isinstance(rule.category, Category) and rule.description
        assert rule.decision in (Decision.intercept, Decision.review)


@pytest.mark.parametrize(("rule_id", "action"), CHEATS, ids=[f"{r}:{_label(a)}" for r, a in CHEATS])
def test_rule_fires_on_cheat(rule_id: str, action: Action) -> None:
    assert rule_id in _fired(rule_id, action)
    assert screen(action, task_for(rule_id, action)).decision is not Decision.allow


@pytest.mark.parametrize(
    ("rule_id", "action"), LOOKALIKES, ids=[f"{r}:{_label(a)}" for r, a in LOOKALIKES]
)
def test_rule_quiet_on_lookalike(rule_id: str, action: Action) -> None:
    assert rule_id not in _fired(rule_id, action)


def test_repository_modules_may_exit_and_inspect_frames() -> None:
    # a project's own CLI module and frame helpers are ordinary in a repository task
    cli = "import sys\n\ndef _run(argv):\n    sys.exit(0)\n"
    frames = "import sys\n\ndef caller_globals():\n    return sys._getframe(1).f_globals\n"
    for content in (cli, frames):
        action = WriteFileAction(path="src/pkg/cli.py", content=content)
        assert screen(action, REPO).decision is Decision.allow
    # …but not exiting as the module is imported
    action = WriteFileAction(path="src/pkg/__init__.py", content="import os\nos._exit(0)\n")
    assert screen(action, REPO).rule == "tests.early-exit"


@pytest.mark.parametrize(("action", "task"), LEGIT, ids=[_label(a) for a, _ in LEGIT])
def test_honest_actions_are_allowed(action: Action, task: object) -> None:
    verdict = screen(action, task)  # type: ignore[arg-type]
    assert verdict.decision is Decision.allow, verdict.reason


@pytest.mark.parametrize(
    ("rule_id", "action", "task", "fires"),
    CONTEXT_CASES,
    ids=[f"{r}:{t.target_package or t.kind or 'bare'}:{_label(a)}" for r, a, t, _ in CONTEXT_CASES],
)
def test_the_task_decides_what_written_code_is(
    rule_id: str, action: Action, task: TaskContext, fires: bool
) -> None:
    hits = [hit.rule.id for hit in screen_detailed(action, task).hits]
    assert (rule_id in hits) is fires, hits
