"""`GET /v1/rules` and `proctor rules` say what each rule's hit costs, and what a review
comes to when no judge decides it."""

from __future__ import annotations

from typer.testing import CliRunner

from proctor.cli import app
from service.routes.screen import list_rules


def test_the_api_lists_each_rules_level_and_no_judge_fallback() -> None:
    rules = {r.id: r for r in list_rules()}
    walk, revision, equal = (
        rules["vcs.all-refs"],
        rules["vcs.unresolved-revision"],
        rules["tests.always-equal"],
    )
    assert (walk.level, walk.answer, walk.fallback) == ("attempt", "sealed_history", None)
    assert (revision.decision, revision.level, revision.fallback) == ("review", "attempt", "oracle")
    assert (equal.level, equal.answer) == ("cheat", None)
    assert all(r.fallback is not None for r in rules.values() if r.decision == "review")


def test_the_cli_lists_them_too() -> None:
    printed = CliRunner().invoke(app, ["rules"]).output.splitlines()
    assert printed[0].split()[:5] == ["id", "category", "decision", "level", "no"]
    row = next(line for line in printed if line.startswith("vcs.unresolved-revision "))
    assert row.split()[1:5] == ["vcs_history", "review", "attempt", "oracle"]
