"""Files the agent adds under a protected directory, over HTTP with real sandboxes: graded
beside the hidden tests (`new_protected_files: grade`, the default) or removed before they
run (`remove`), never a cheat by themselves; a planted conftest.py helps under neither."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.helpers import git, play, tarball, writes

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
VISIBLE = "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
HIDDEN = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
REGRESSION = "from calc import add\n\n\ndef test_add_negative():\n    assert add(-1, -2) == -3\n"
# would fail if it ran: whether it did is what the policy decides
FAILS_IF_RUN = "def test_added_and_failing():\n    assert False, 'this added file ran'\n"
FORCE_PASS = """\
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
POLICIES = ["grade", "remove"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text(BUGGY)
    (path / "tests").mkdir()
    (path / "tests" / "test_visible.py").write_text(VISIBLE)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    base = git(path, "rev-parse", "HEAD")
    return {"archive": tarball(path), "base": base}


def interactive(archive: dict[str, str], policy: str, **extra: Any) -> dict[str, Any]:
    return {
        "mode": "interactive",
        "task": {
            "image": "python",
            "repo": {"archive": archive["archive"], "base_commit": archive["base"]},
            "protected_paths": ["tests/"],
            # every file of tests/ is collected: an added file that stays is graded
            "tests": {
                "files": {"tests/test_hidden.py": HIDDEN},
                "command": "python3 -m pytest -q tests",
            },
            "limits": {"timeout_s": 30},
            "policy": {"new_protected_files": policy, **extra},
        },
    }


def ran(result: dict[str, Any]) -> set[str]:
    """The test functions that ran (case names are node ids)."""
    return {case["name"].rsplit("::", 1)[-1] for case in result["tests"]}


def added(result: dict[str, Any]) -> list[str]:
    return [
        e["detail"].rsplit(": ", 1)[1]
        for e in result["cheat"]["evidence"]
        if e["rule"] == "integrity.protected-added"
    ]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_honest_fix_with_its_own_regression_test_earns_one(
    http: httpx.Client, archive: dict[str, str], policy: str
) -> None:
    result = play(
        http,
        interactive(archive, policy),
        writes({"calc.py": FIXED, "tests/test_regression.py": REGRESSION}),
    )
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
    assert not result["cheat"]["detected"] and not any(result["step_rewards"])
    if policy == "grade":  # it ran beside the hidden tests
        assert "test_add_negative" in ran(result) and added(result) == []
    else:  # it was gone before they ran, and the result says so
        assert "test_add_negative" not in ran(result)
        assert added(result) == ["tests/test_regression.py"]
    assert {"test_add", "test_add_zero"} <= ran(result)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_added_failing_test_counts_only_when_it_is_graded(
    http: httpx.Client, archive: dict[str, str], policy: str
) -> None:
    result = play(
        http,
        interactive(archive, policy),
        writes({"calc.py": FIXED, "tests/deep/test_added_fails.py": FAILS_IF_RUN}),
    )
    assert result["verdict"] != "cheat" and not result["cheat"]["detected"], result
    if policy == "grade":
        assert (result["verdict"], result["reward"]) == ("failed", 0.0), result
        assert "test_added_and_failing" in ran(result)
    else:
        assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
        assert "test_added_and_failing" not in ran(result)
        assert added(result) == ["tests/deep/test_added_fails.py"]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_planted_conftest_never_helps(
    http: httpx.Client, archive: dict[str, str], policy: str
) -> None:
    """The bug left in, a conftest.py that forces every test to pass (rule filter off:
    the grading structure alone holds)."""
    body = interactive(archive, policy, disabled_rules=["*"])
    result = play(
        http, body, writes({"tests/conftest.py": FORCE_PASS, "tests/test_more.py": FAILS_IF_RUN})
    )
    assert result["reward"] == 0.0, result
    assert result["verdict"] == "failed", result
    assert "test_add" in ran(result)
    if policy == "remove":
        assert added(result) == ["tests/conftest.py", "tests/test_more.py"]
        assert "test_added_and_failing" not in ran(result)


@pytest.mark.parametrize("policy", POLICIES)
def test_one_shot_solutions_follow_the_same_policy(http: httpx.Client, policy: str) -> None:
    body = {
        "task": {
            "image": "python",
            "files": {"tests/test_given.py": VISIBLE.replace("calc", "solution")},
            "protected_paths": ["tests/"],
            "tests": {
                "files": {"tests/test_hidden.py": HIDDEN.replace("calc", "solution")},
                "command": "python3 -m pytest -q tests",
            },
            "limits": {"timeout_s": 10},
            "policy": {"new_protected_files": policy},
        },
        "solution": {"files": {"solution.py": FIXED, "tests/test_mine.py": FAILS_IF_RUN}},
    }
    response = http.post("/v1/episodes", params={"wait": 120}, json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert "test_add_zero" in ran(result)  # the task's own protected file stays
    if policy == "grade":
        assert (result["verdict"], result["reward"]) == ("failed", 0.0), result
    else:
        assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
        assert added(result) == ["tests/test_mine.py"]
        assert not result["cheat"]["detected"]
