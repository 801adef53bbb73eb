"""The wire shapes of repositories by reference or by path, and of `give_up`."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from proctor.models import (
    Action,
    EpisodeCreate,
    GiveUpAction,
    InteractiveAction,
    RepoSnapshot,
)


def test_a_reference_needs_no_base_commit_and_a_path_does() -> None:
    assert RepoSnapshot(ref="sha256:" + "a" * 64).base_commit == ""
    with pytest.raises(ValidationError, match="base_commit"):
        RepoSnapshot(path="/testbed")
    assert RepoSnapshot(path="/testbed", base_commit="abcdef1").path == "/testbed"


@pytest.mark.parametrize(
    "fields",
    [
        {"ref": "sha256:" + "a" * 64, "path": "/testbed", "base_commit": "abcdef1"},
        {"base_commit": "abcdef1"},
        {"ref": "md5:abc"},
        {"path": "testbed", "base_commit": "abcdef1"},
        {"path": "/testbed/../etc", "base_commit": "abcdef1"},
        {"path": "/", "base_commit": "abcdef1"},
        {"path": "/workspace", "base_commit": "abcdef1"},
        {"path": "/tmp/repo", "base_commit": "abcdef1"},
        {"path": "/proc/self", "base_commit": "abcdef1"},
    ],
)
def test_bad_repositories_are_refused(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        RepoSnapshot.model_validate(fields)


def test_give_up_is_an_interactive_action_only() -> None:
    action = TypeAdapter(InteractiveAction).validate_python({"type": "give_up", "reason": "x"})
    assert isinstance(action, GiveUpAction)
    with pytest.raises(ValidationError):
        TypeAdapter(Action).validate_python({"type": "give_up"})
    with pytest.raises(ValidationError):
        EpisodeCreate.model_validate(
            {
                "task": {"tests": {"files": {"test_x.py": "def test_x(): pass\n"}}},
                "solution": {"actions": [{"type": "give_up"}]},
            }
        )
