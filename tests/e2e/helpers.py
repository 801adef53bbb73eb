"""Building episode requests (and the repositories they carry) in tests."""

from __future__ import annotations

import base64
import io
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import httpx

# a test author, and no system or user configuration of the machine's
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/bin:/bin",
}

TEST_ADD = """\
from solution import add


def test_small():
    assert add(1, 2) == 3


def test_zero():
    assert add(0, 0) == 0
"""


def episode(
    solution: str, *, tests: str = TEST_ADD, unscreened: bool = False, **limits: Any
) -> dict[str, Any]:
    """A one-shot request. `unscreened` switches the rule filter off, for tests of what
    the sandbox itself contains (each layer is tested on its own)."""
    task: dict[str, Any] = {
        "image": "python",
        "tests": {"files": {"test_solution.py": tests}},
        "limits": {"timeout_s": 10, **limits},
    }
    if unscreened:
        task["policy"] = {"disabled_rules": ["*"]}
    return {"task": task, "solution": {"files": {"solution.py": solution}}}


def run(http: httpx.Client, body: dict[str, Any], *, wait: float = 120) -> dict[str, Any]:
    response = http.post("/v1/episodes", params={"wait": wait}, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def git(repo: Path, *args: str) -> str:
    """git in `repo`; its stdout."""
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**GIT_ENV, "HOME": str(repo)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def tarball(path: Path) -> str:
    """A directory as a task's `repo.archive` takes it: a tar.gz, base64."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(path, arcname=".")
    return base64.b64encode(buffer.getvalue()).decode()


def play(http: httpx.Client, body: dict[str, Any], actions: list[dict[str, Any]]) -> dict[str, Any]:
    """An interactive episode: created, its actions in order, finished; its result."""
    response = http.post("/v1/episodes", json=body)
    assert response.status_code == 201, response.text
    episode_id = response.json()["id"]
    for action in actions:
        step = http.post(f"/v1/episodes/{episode_id}/actions", json=action)
        assert step.status_code == 200, step.text
    finished = http.post(f"/v1/episodes/{episode_id}/finish")
    assert finished.status_code == 200, finished.text
    result: dict[str, Any] = finished.json()
    return result


def writes(files: dict[str, str]) -> list[dict[str, Any]]:
    """`write_file` actions, one per file."""
    return [{"type": "write_file", "path": p, "content": c} for p, c in files.items()]
