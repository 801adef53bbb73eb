"""A repository with a submodule, over HTTP with a real sandbox: the agent gets a working
checkout of the submodule at the commit its gitlink names, and none of its future."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.e2e.helpers import git, tarball


def test_the_agent_sees_the_submodule_at_its_gitlink_only(
    http: httpx.Client, tmp_path: Path
) -> None:
    dep = tmp_path / "dep"
    dep.mkdir()
    git(dep, "init", "-q", "-b", "main")
    (dep / "lib.py").write_text("def f():\n    return 1\n")
    git(dep, "add", "-A")
    git(dep, "commit", "-qm", "dep at its pin")
    pinned = git(dep, "rev-parse", "HEAD")
    (dep / "lib.py").write_text("def f():\n    return 42  # UPSTREAM-FUTURE\n")
    git(dep, "commit", "-qam", "UPSTREAM-FUTURE of dep")
    future = git(dep, "rev-parse", "HEAD")

    work = tmp_path / "super"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "app.py").write_text("from dep.lib import f\n")
    git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", f"file://{dep}", "dep")
    git(work / "dep", "checkout", "-q", pinned)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "app on dep")
    base = git(work, "rev-parse", "HEAD")
    git(work / "dep", "checkout", "-q", future)  # the upload's checkout has moved on

    body = {
        "mode": "interactive",
        "task": {
            "image": "python",
            "repo": {"archive": tarball(work), "base_commit": base},
            "tests": {"files": {"test_app.py": "def test_ok():\n    pass\n"}},
            "limits": {"timeout_s": 30},
            "policy": {"disabled_rules": ["*"]},  # the sealed snapshot itself, seen by real git
        },
    }
    created = http.post("/v1/episodes", json=body)
    assert created.status_code == 201, created.text
    episode = created.json()["id"]

    def bash(command: str) -> dict[str, object]:
        step = http.post(
            f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": command}
        )
        assert step.status_code == 200, step.text
        observation: dict[str, object] = step.json()["observation"]
        return observation

    assert bash("cat dep/lib.py")["output"] == "def f():\n    return 1\n"
    assert bash("git -C dep rev-parse HEAD")["output"] == f"{pinned}\n"
    assert str(bash("git submodule status")["output"]).startswith(f" {pinned} dep")
    assert bash(f"git -C dep cat-file -t {future}")["exit_code"] != 0
    seen = bash("git -C dep log --all --oneline; grep -rl UPSTREAM-FUTURE . .git dep/.git; true")
    assert "UPSTREAM-FUTURE" not in str(seen["output"]), seen
    assert bash("git status --porcelain")["output"] == ""
    finished = http.post(f"/v1/episodes/{episode}/finish")
    assert finished.status_code == 200, finished.text
    assert finished.json()["reward"] == 1.0, finished.json()
