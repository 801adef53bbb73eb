"""Building episode requests in tests."""

from __future__ import annotations

from typing import Any

import httpx

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
