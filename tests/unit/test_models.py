"""The wire contract refuses what a service must never accept."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from proctor.models import EpisodeCreate, check_relative_path


def body(**task: Any) -> dict[str, Any]:
    return {
        "task": {"tests": {"files": {"test_a.py": "def test(): pass"}}, **task},
        "solution": {"files": {"solution.py": "x = 1"}},
    }


def test_minimal_request_gets_defaults() -> None:
    request = EpisodeCreate.model_validate(body())
    assert request.task.image == "python"
    assert request.task.limits.timeout_s == 10
    assert request.task.tests.format == "junit"


@pytest.mark.parametrize(
    "path", ["../x", "/etc/passwd", "a/../../b", "a/../..", "", "a\x00b", "..", "a\\b"]
)
def test_path_traversal_is_refused(path: str) -> None:
    with pytest.raises(ValueError):
        check_relative_path(path)
    with pytest.raises(ValidationError):
        EpisodeCreate.model_validate(
            {"task": {"tests": {"files": {}}}, "solution": {"files": {path: "x"}}}
        )


def test_normal_paths_pass() -> None:
    assert check_relative_path("pkg/mod.py") == "pkg/mod.py"
    assert check_relative_path("./a.py") == "a.py"


@pytest.mark.parametrize(
    "limits",
    [
        {"timeout_s": -1},
        {"timeout_s": 0},
        {"memory_mb": 1},
        {"memory_mb": 10**9},
        {"pids": 1},
        {"cpus": 0},
        {"output_bytes": 10**12},
    ],
)
def test_bad_limits_are_refused(limits: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EpisodeCreate.model_validate(body(limits=limits))


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="imagee"):
        EpisodeCreate.model_validate(body(imagee="python"))


def test_oneshot_needs_a_solution_and_interactive_refuses_one() -> None:
    with pytest.raises(ValidationError, match="needs a solution"):
        EpisodeCreate.model_validate({"task": {"tests": {"files": {}}}})
    with pytest.raises(ValidationError, match="takes actions"):
        EpisodeCreate.model_validate({**body(), "mode": "interactive"})


def test_oversized_file_is_refused() -> None:
    with pytest.raises(ValidationError, match="larger than"):
        EpisodeCreate.model_validate(
            {
                "task": {"tests": {"files": {}}},
                "solution": {"files": {"big.py": "x" * (9 * 1024 * 1024)}},
            }
        )
