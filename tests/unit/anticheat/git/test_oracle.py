"""The live git oracle, against a real repository with a future the agent must not see."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from anticheat.git.oracle import SandboxGitOracle
from anticheat.git.seal import seal
from anticheat.screen import screen
from proctor.models import BashAction, Decision, RepoSnapshot, TaskContext
from tests.unit.anticheat.git.zoo import archive_of, unpack

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
    """A sealed snapshot of a repository with a future, and the agent's own commit on it."""
    up = tmp_path / "up"
    up.mkdir()
    _git(up, "init", "-q", "-b", "main")
    shas = {}
    for name in ("old", "base", "future"):
        (up / "f.txt").write_text(name)
        _git(up, "add", "f.txt")
        _git(up, "commit", "-qm", name)
        shas[name] = _git(up, "rev-parse", "HEAD")
    _git(up, "branch", "upstream-fix")  # the future, on a branch
    sealed = seal(RepoSnapshot(archive=archive_of(up), base_commit=shas["base"]))
    work = unpack(sealed.archive or "", tmp_path / "work")
    (work / "f.txt").write_text("mine")
    _git(work, "commit", "-qam", "agent's own work")
    shas["own"] = _git(work, "rev-parse", "HEAD")
    shas["blob"] = _git(work, "rev-parse", "HEAD:f.txt")
    shas["dir"] = str(work)
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
    assert oracle.is_ancestor_of_base(repo["future"]) is False  # a sha learnt elsewhere
    assert oracle.is_ancestor_of_base(repo["future"][:12] + "~1") is False
    assert oracle.is_ancestor_of_base(repo["blob"]) is True
    assert oracle.is_ancestor_of_base("upstream-fix") is None  # not there: a path, or nothing
    assert oracle.is_ancestor_of_base("no-such-branch") is None
    assert oracle.is_ancestor_of_base("--all") is None  # never passed to git as an option


def test_own_commit_reset_away_stays_fair(repo: dict[str, str]) -> None:
    work = Path(repo["dir"])
    _git(work, "reset", "-q", "--hard", "HEAD~1")
    oracle = _oracle(repo)
    assert oracle.is_ancestor_of_base("HEAD@{1}") is True
    task = TaskContext(kind="repo", base_commit=repo["base"])
    for command in ("git reflog", "git reset --hard HEAD@{1}", f"git show {repo['own']}"):
        assert screen(BashAction(command=command), task, git=oracle).decision is Decision.allow


def test_screen_with_live_oracle(repo: dict[str, str]) -> None:
    task = TaskContext(kind="repo", base_commit=repo["base"])
    oracle = _oracle(repo)
    for probe in (f"git show {repo['future']}", f"git show {repo['future'][:12]}:f.txt"):
        assert screen(BashAction(command=probe), task, git=oracle).rule == "vcs.foreign-revision"
    old = BashAction(command=f"git show {repo['old'][:7]} --stat")
    assert screen(old, task, git=oracle).decision is Decision.allow


def test_bare_branch_names_are_asked(repo: dict[str, str], tmp_path: Path) -> None:
    _git(Path(repo["dir"]), "branch", "mine", repo["own"])
    task = TaskContext(kind="repo", base_commit=repo["base"])
    oracle = _oracle(repo)
    for command in ("git checkout mine", "git checkout f.txt", "git log --oneline docs"):
        assert screen(BashAction(command=command), task, git=oracle).decision is Decision.allow
