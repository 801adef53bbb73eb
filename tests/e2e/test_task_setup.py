"""A task whose own setup fails ends `task_error` (reward 0, for the trainer to drop), not
`infra_error`: the setup runs before the solution is written or the agent acts, so it is the
task's fault, neither the code's nor our infrastructure's."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.e2e.helpers import run

BROKEN = ["echo 'no such requirement: frobnicate==9' >&2; exit 3"]


def _task() -> dict[str, Any]:
    return {
        "image": "python",
        "setup": BROKEN,
        "tests": {"files": {"test_ok.py": "def test_ok():\n    pass\n"}},
        "limits": {"timeout_s": 10},
    }


def _ended(result: dict[str, Any]) -> None:
    assert (result["status"], result["verdict"], result["reward"]) == (
        "failed",
        "task_error",
        0.0,
    ), result
    assert "no such requirement" in result["reason"], result["reason"]


def test_a_one_shot_episode_whose_setup_fails_is_a_task_error(http: httpx.Client) -> None:
    body = {"task": _task(), "solution": {"files": {"solution.py": "x = 1\n"}}}
    _ended(run(http, body))


def test_an_interactive_episode_whose_setup_fails_is_a_task_error(http: httpx.Client) -> None:
    created = http.post("/v1/episodes", json={"mode": "interactive", "task": _task()})
    if created.status_code == 200:  # it ended while the request waited for it to be ready
        _ended(created.json())
        return
    assert created.status_code == 201, created.text
    episode = created.json()["id"]
    deadline = time.monotonic() + 120
    while True:
        result = http.get(f"/v1/episodes/{episode}").json()
        if result["status"] not in ("queued", "starting", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    _ended(result)
