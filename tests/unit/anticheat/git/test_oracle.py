"""The live git oracle, against a real repository with a future the agent must not see."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from anticheat.git.oracle import SandboxGitOracle
from anticheat.screen import screen
from proctor.models import BashAction, Decision, TaskContext

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, str]:
    _git(tmp_path, "init", "-q", "-b", "main")
    shas = {}
    for name in ("old", "base", "future"):
        (tmp_path / "f.txt").write_text(name)
        _git(tmp_path, "add", "f.txt")
        _git(tmp_path, "commit", "-qm", name)
        shas[name] = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "branch", "upstream-fix")  # the future, on a branch
    _git(tmp_path, "reset", "-q", "--hard", shas["base"])
    (tmp_path / "f.txt").write_text("mine")
    _git(tmp_path, "commit", "-qam", "agent's own work")
    shas["own"] = _git(tmp_path, "rev-parse", "HEAD")
    shas["blob"] = _git(tmp_path, "rev-parse", "HEAD:f.txt")
    shas["dir"] = str(tmp_path)
    return shas


def _oracle(shas: dict[str, str]) -> SandboxGitOracle:
    def run(argv: Sequence[str]) -> tuple[int, str]:
        done = subprocess.run(list(argv), cwd=shas["dir"], capture_output=True, text=True)
        return done.returncode, done.stdout

    return SandboxGitOracle(run, shas["base"])


def test_ancestry(repo: dict[str, str]) -> None:
    oracle = _oracle(repo)
    assert oracle.is_ancestor_of_base(repo["old"][:8]) is True
    assert oracle.is_ancestor_of_base(repo["base"]) is True
    assert oracle.is_ancestor_of_base(repo["own"][:10]) is True  # the agent's own commit
    assert oracle.is_ancestor_of_base(repo["future"][:7]) is False
    assert oracle.is_ancestor_of_base("upstream-fix") is False
    assert oracle.is_ancestor_of_base(repo["blob"]) is True
    assert oracle.is_ancestor_of_base("no-such-branch") is None
    assert oracle.is_ancestor_of_base("--all") is None  # never passed to git as an option


def test_screen_with_live_oracle(repo: dict[str, str]) -> None:
    task = TaskContext(kind="repo", base_commit=repo["base"])
    oracle = _oracle(repo)
    future = BashAction(command=f"git show {repo['future'][:7]}:f.txt")
    assert screen(future, task, git=oracle).rule == "vcs.foreign-revision"
    old = BashAction(command=f"git show {repo['old'][:7]} --stat")
    assert screen(old, task, git=oracle).decision is Decision.allow
    branch = BashAction(command="git checkout upstream-fix")
    assert screen(branch, task, git=oracle).decision is Decision.intercept


def test_bare_branch_names_are_asked(repo: dict[str, str], tmp_path: Path) -> None:
    _git(Path(repo["dir"]), "branch", "sneaky", repo["future"])
    task = TaskContext(kind="repo", base_commit=repo["base"])
    oracle = _oracle(repo)
    assert (
        screen(BashAction(command="git checkout sneaky"), task, git=oracle).decision
        is Decision.intercept
    )
    assert (
        screen(BashAction(command="git checkout f.txt"), task, git=oracle).decision
        is Decision.allow
    )
    assert (
        screen(BashAction(command="git log --oneline docs"), task, git=oracle).decision
        is Decision.allow
    )
