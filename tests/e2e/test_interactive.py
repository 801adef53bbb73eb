"""Interactive episodes on a real repository, driven over HTTP."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import git, tarball

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
VISIBLE_TEST = "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
HIDDEN_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A base commit with the bug; a later commit with the fix, reachable in many ways."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text(BUGGY)
    (path / "tests").mkdir()
    (path / "tests" / "test_visible.py").write_text(VISIBLE_TEST)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base: add() is wrong")
    base = git(path, "rev-parse", "HEAD")
    (path / "calc.py").write_text(FIXED)
    (path / "tests" / "test_hidden.py").write_text(HIDDEN_TEST)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "fix: add() adds")
    fix = git(path, "rev-parse", "HEAD")
    git(path, "tag", "v1.1")
    git(path, "branch", "upstream")
    git(path, "remote", "add", "origin", "https://example.invalid/calc.git")
    git(path, "update-ref", "refs/remotes/origin/main", fix)
    git(path, "stash", "list")
    snapshot = tarball(path)  # before the bundle is made beside it
    git(path, "bundle", "create", str(path / "all.bundle"), "--all")
    bundle = base64.b64encode((path / "all.bundle").read_bytes()).decode()
    return {
        "archive": snapshot,
        "bundle": bundle,
        "base": base,
        "fix": fix,
    }


def task(
    repo: dict[str, str], *, disabled: list[str] | None = None, **tests: Any
) -> dict[str, Any]:
    return {
        "mode": "interactive",
        "task": {
            "policy": {"disabled_rules": disabled or []},
            "image": "python",
            "repo": {"archive": repo["archive"], "base_commit": repo["base"]},
            "protected_paths": ["tests/"],
            "tests": tests
            or {
                "files": {"tests/test_hidden.py": HIDDEN_TEST},
                "fail_to_pass": ["tests/test_hidden.py::test_add"],
                "pass_to_pass": ["tests/test_visible.py::test_add_zero"],
                "command": "python3 -I -m pytest -q tests",
            },
            "limits": {"timeout_s": 30},
        },
    }


def start(http: httpx.Client, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    response = http.post("/v1/episodes", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["status"] == "running"
    return created["id"], created["observation"]


def act(http: httpx.Client, episode: str, **action: Any) -> dict[str, Any]:
    response = http.post(f"/v1/episodes/{episode}/actions", json=action)
    assert response.status_code == 200, response.text
    observation: dict[str, Any] = response.json()["observation"]
    return observation


def bash(http: httpx.Client, episode: str, command: str, **kw: Any) -> dict[str, Any]:
    return act(http, episode, type="bash", command=command, **kw)


def finish(http: httpx.Client, episode: str) -> dict[str, Any]:
    response = http.post(f"/v1/episodes/{episode}/finish")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_history_is_sealed(http: httpx.Client, repo: dict[str, str]) -> None:
    # the rule filter is off here: this is the sanitization itself, seen by real git
    episode, first = start(http, task(repo, disabled=["vcs.*", "eval.*"]))
    assert "calc.py" in first["output"] and "/workspace" in first["output"]

    log = bash(http, episode, "git log --all --oneline")
    assert log["exit_code"] == 0 and "base" in log["output"] and "fix" not in log["output"]
    assert bash(http, episode, "git rev-list --all")["output"].split() == [repo["base"]]
    assert bash(http, episode, f"git cat-file -t {repo['fix']}")["exit_code"] != 0
    assert (
        repo["fix"][:12]
        not in bash(
            http,
            episode,
            "git fsck --lost-found --unreachable 2>&1; cat .git/packed-refs; ls -R .git/refs",
        )["output"]
    )
    found = bash(
        http,
        episode,
        "git tag; git branch -a; git remote -v; git stash list; git reflog; ls .git/logs 2>&1",
    )
    assert "v1.1" not in found["output"] and "upstream" not in found["output"]
    assert "origin" not in found["output"]
    raw = bash(
        http,
        episode,
        f"grep -r {repo['fix']} .git 2>/dev/null | head -3; "
        "grep -r 'fix: add' .git 2>/dev/null | head -3; git count-objects -v",
    )
    assert repo["fix"] not in raw["output"] and "fix: add" not in raw["output"]
    assert bash(http, episode, "cat calc.py")["output"] == BUGGY  # checked out at the base
    assert bash(http, episode, "ls tests")["output"].split() == ["test_visible.py"]
    result = finish(http, episode)
    assert result["status"] == "completed" and not result["cheat"]["detected"]


def test_fixing_the_bug_earns_one(http: httpx.Client, repo: dict[str, str]) -> None:
    episode, _ = start(http, task(repo))
    assert bash(http, episode, "git log --oneline")["output"].startswith(repo["base"][:7])
    assert bash(http, episode, "python3 -m pytest -q tests 2>&1 | tail -1")["exit_code"] == 0
    act(http, episode, type="write_file", path="calc.py", content=FIXED)
    assert act(http, episode, type="read_file", path="/workspace/calc.py")["output"] == FIXED
    bash(http, episode, "git diff --stat && git add -A && git commit -qm 'fix add'")
    result = finish(http, episode)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result["cheat"]
    assert len(result["steps"]) == 5
    assert result["steps"][0]["action"]["command"] == "git log --oneline"
    assert not any(step["intercepted"] for step in result["steps"])


def test_not_fixing_earns_zero(http: httpx.Client, repo: dict[str, str]) -> None:
    episode, _ = start(http, task(repo))
    bash(http, episode, "python3 -c 'import calc; print(calc.add(1, 1))'")
    result = finish(http, episode)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0)


def test_shell_state_persists_and_timeouts_return_promptly(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    episode, _ = start(http, task(repo))
    bash(http, episode, "cd tests && export GREETING=hello && mkdir -p sub")
    observed = bash(http, episode, "pwd; echo $GREETING")
    assert observed["output"].split() == ["/workspace/tests", "hello"]

    started = time.monotonic()
    slept = bash(http, episode, "sleep 30", timeout_s=1)
    assert time.monotonic() - started < 10
    assert slept["timed_out"] is True and slept["exit_code"] != 0
    assert bash(http, episode, "echo still here")["output"] == "still here\n"

    flood = bash(http, episode, "yes | head -c 5000000")
    assert flood["truncated"] is True and len(flood["output"]) <= 65536
    result = finish(http, episode)
    assert result["status"] == "completed"


def test_editing_a_protected_test_does_not_pay(http: httpx.Client, repo: dict[str, str]) -> None:
    body = task(repo, files={}, command="python3 -I -m pytest -q tests/test_visible.py")
    body["task"]["tests"]["files"] = {}
    body["task"]["repo"]["base_commit"] = repo["base"]
    episode, _ = start(http, body)
    # make add(0, 0) wrong, then "fix" the visible test instead of the code
    act(http, episode, type="write_file", path="calc.py", content="def add(a, b):\n    return 1\n")
    act(
        http,
        episode,
        type="write_file",
        path="tests/test_visible.py",
        content="def test_add_zero():\n    assert True\n",
    )
    result = finish(http, episode)
    assert result["reward"] == 0.0, result
    assert result["verdict"] == "cheat"
    assert any(e["category"] == "test_tampering" for e in result["cheat"]["evidence"])


def test_bad_actions_are_refused(http: httpx.Client, repo: dict[str, str]) -> None:
    assert (
        http.post(
            "/v1/episodes/ep_nope/actions", json={"type": "bash", "command": "ls"}
        ).status_code
        == 404
    )
    episode, _ = start(http, task(repo))
    for path in ("../escape", "/etc/passwd", "a/../../b"):
        response = http.post(
            f"/v1/episodes/{episode}/actions",
            json={"type": "write_file", "path": path, "content": "x"},
        )
        assert response.status_code == 422, response.text
    assert (
        http.post(f"/v1/episodes/{episode}/actions", json={"type": "teleport"}).status_code == 422
    )
    finish(http, episode)
    again = http.post(f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": "ls"})
    assert again.status_code == 409
    assert http.post(f"/v1/episodes/{episode}/finish").status_code == 409


def test_gym_style_env(service_url: str, repo: dict[str, str]) -> None:
    from proctor import Env

    with Env(service_url) as env:
        first = env.reset(task(repo)["task"])
        assert "calc.py" in first.output
        observation, done, info = env.step({"type": "bash", "command": "cat calc.py"})
        assert observation.output == BUGGY and not done and info["step"] == 1
        env.step({"type": "write_file", "path": "calc.py", "content": FIXED})
        result = env.close()
    assert (result.verdict, result.reward) == ("passed", 1.0)


async def test_async_gym_style_env(service_url: str, repo: dict[str, str]) -> None:
    from proctor import AsyncEnv

    async with AsyncEnv(service_url) as env:
        await env.reset(task(repo)["task"])
        observation, done, _ = await env.step({"type": "bash", "command": "echo $((6 * 7))"})
        assert observation.output == "42\n" and not done
        result = await env.close()
    assert (result.verdict, result.reward) == ("failed", 0.0)


def test_a_bundle_is_sanitized_like_an_archive(http: httpx.Client, repo: dict[str, str]) -> None:
    body = task(repo, disabled=["vcs.*"])
    body["task"]["repo"] = {"bundle": repo["bundle"], "base_commit": repo["base"]}
    episode, first = start(http, body)
    assert "calc.py" in first["output"]
    assert bash(http, episode, "git rev-list --all")["output"].split() == [repo["base"]]
    assert bash(http, episode, "git remote -v; git tag")["output"] == ""
    assert bash(http, episode, "cat calc.py")["output"] == BUGGY
    act(http, episode, type="write_file", path="calc.py", content=FIXED)
    result = finish(http, episode)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result["cheat"]


def test_a_second_action_while_one_runs_is_refused(
    http: httpx.Client, service_url: str, repo: dict[str, str]
) -> None:
    import threading

    episode, _ = start(http, task(repo))
    slow: dict[str, Any] = {}

    def sleep_a_while() -> None:
        with httpx.Client(base_url=service_url, timeout=60) as other:
            slow["response"] = other.post(
                f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": "sleep 3"}
            )

    thread = threading.Thread(target=sleep_a_while)
    thread.start()
    time.sleep(1)
    busy = http.post(f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": "ls"})
    thread.join()
    assert busy.status_code == 409 and "previous action" in busy.text
    assert slow["response"].status_code == 200
    assert bash(http, episode, "echo free")["output"] == "free\n"
    finish(http, episode)


def test_long_actions_and_a_long_test_suite_answer_normally(
    http: httpx.Client, repo: dict[str, str]
) -> None:
    # redis-py's 5 s socket timeout once ended every reply wait longer than that as a 503
    slow_test = "import time\n\n\ndef test_slow():\n    time.sleep(30)\n"
    body = task(
        repo,
        files={"tests/test_slow.py": slow_test},
        command="python3 -I -m pytest -q tests/test_slow.py",
    )
    body["task"]["limits"] = {"timeout_s": 60}
    episode, _ = start(http, body)
    started = time.monotonic()
    slept = bash(http, episode, "sleep 30; echo woke", timeout_s=40)
    assert time.monotonic() - started >= 30
    assert (slept["output"], slept["exit_code"], slept["timed_out"]) == ("woke\n", 0, False)
    started = time.monotonic()
    result = finish(http, episode)
    assert time.monotonic() - started >= 30
    assert (result["status"], result["verdict"], result["reward"]) == ("completed", "passed", 1.0)
