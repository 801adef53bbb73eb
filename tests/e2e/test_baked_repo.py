"""A repository baked into a task image, as public SWE-style images ship it (with the later
history that holds the fix): over HTTP with real sandboxes, the agent finds it at its path
sealed like an upload — nothing of the future readable, by the byte scan of the seal's own
tests — the next episode of the task starts from the sealed copy kept in Redis, and a path
that is not a repository at that commit ends the episode as `task_error` before the agent
acts."""

from __future__ import annotations

import base64
import io
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import redis

from tests.conftest import claimed_database, running_service
from tests.unit.anticheat.git.test_seal import full_clone
from tests.unit.anticheat.git.zoo import Upstream, git, scan, upstream

pytestmark = pytest.mark.usefixtures("docker_ready")

BASE_IMAGE = "proctor/sandbox-python:latest"
TESTS = {"test_lib.py": "from lib import f\n\n\ndef test_fixed():\n    assert f() == 42\n"}
FIX = "def f():\n    return 42\n"


@pytest.fixture(scope="module")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Upstream]]:
    """(service url, redis url, upstream); its log is `service.log` beside the upstream.
    A deployment of its own serving an image with a full clone at /testbed (tags, stash,
    notes, replace refs, reflogs, packed refs, ORIG_HEAD, FETCH_HEAD, a linked worktree,
    the index at a later blob, an untracked copy of the fix) and a plain directory at
    /notrepo."""
    root = tmp_path_factory.mktemp("baked")
    up = upstream(root)
    work = full_clone(up, root)
    # and more of what an image's build leaves: a linked worktree at the fix, the index
    # pointing at a later blob, a FETCH_HEAD
    git(work, "worktree", "add", "-q", str(root / "fix-worktree"), up.future)
    (work / "lib.py").write_text("def f():\n    return 42  # FUTURE-FIX staged\n")
    git(work, "add", "lib.py")
    git(work, "fetch", "-q", "origin")
    context = root / "context"
    context.mkdir()
    work.rename(context / "testbed")
    (context / "notrepo").mkdir()
    (context / "notrepo" / "README").write_text("no history here\n")
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY testbed/ /testbed/\nCOPY notrepo/ /notrepo/\n"
    )
    client = docker.from_env()
    tag = f"proctor/test-baked:{uuid.uuid4().hex[:8]}"
    client.images.build(path=str(context), tag=tag, rm=True)
    try:
        images = f"python={BASE_IMAGE},baked={tag}"
        with (
            claimed_database() as redis_url,
            running_service(
                redis_url, root / "service.log", PROCTOR_IMAGES=images, PROCTOR_POOL_SIZE="0"
            ) as url,
        ):
            yield url, redis_url, up
    finally:
        client.images.remove(tag, force=True)


def _task(repo: dict[str, Any]) -> dict[str, Any]:
    return {
        "mode": "interactive",
        "task": {
            "image": "baked",
            "repo": repo,
            "tests": {"files": TESTS},
            "limits": {"timeout_s": 30},
            "policy": {"disabled_rules": ["*"]},  # the sealed copy itself, seen by real git
        },
    }


def _bash(http: httpx.Client, episode: str, command: str) -> dict[str, Any]:
    step = http.post(f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": command})
    assert step.status_code == 200, step.text
    observation: dict[str, Any] = step.json()["observation"]
    return observation


def _pull_tree(http: httpx.Client, episode: str, path: str, into: Path) -> Path:
    """What the agent can read at `path` (links followed), unpacked here for the scan."""
    seen = _bash(http, episode, f"tar chzf - -C {path} . | base64 -w0")
    assert seen["exit_code"] == 0 and not seen.get("stdout_truncated"), seen
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(seen["output"])), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into


def test_the_baked_repository_is_sealed_cached_and_graded(
    baked: tuple[str, str, Upstream], tmp_path: Path
) -> None:
    url, redis_url, up = baked
    future = up.future_objects()
    with httpx.Client(base_url=url, timeout=180) as http:
        created = http.post(
            "/v1/episodes", json=_task({"path": "/testbed", "base_commit": up.base})
        )
        assert created.status_code == 201, created.text
        episode = created.json()["id"]
        assert created.json()["status"] == "running", created.json()

        # at its path and in the workspace: the base, one branch, no later history
        assert _bash(http, episode, "cd /testbed && git rev-parse HEAD")["output"] == up.base + "\n"
        assert _bash(http, episode, "git for-each-ref --format='%(refname)'")["output"] == (
            "refs/heads/main\n"
        )
        for sha in sorted(future)[:3]:
            assert _bash(http, episode, f"git -C /testbed cat-file -e {sha}")["exit_code"] != 0
        listing = _bash(http, episode, "git log --all --oneline; git stash list; git tag")
        assert "FUTURE-FIX" not in listing["output"], listing
        for name in ("ORIG_HEAD", "FETCH_HEAD", "packed-refs", "logs", "refs/stash"):
            gone = _bash(http, episode, f"test -e /testbed/.git/{name}")
            assert gone["exit_code"] != 0, name
        # the byte scan of every file the agent can read there
        for path in ("/testbed", "/workspace"):
            tree = _pull_tree(http, episode, path, tmp_path / path.strip("/"))
            assert scan(tree, future) == [], path
        # an edit through the image's path is the workspace's: it is graded
        wrote = _bash(http, episode, f"printf '{FIX}' > /testbed/lib.py && cat /workspace/lib.py")
        assert wrote["output"] == FIX, wrote
        finished = http.post(f"/v1/episodes/{episode}/finish")
        assert finished.status_code == 200, finished.text
        assert (finished.json()["verdict"], finished.json()["reward"]) == ("passed", 1.0)

        # the sealed copy is kept per (image digest, path, base): one key, reused
        kept = redis.Redis.from_url(redis_url).keys("proctor:repo:*")
        assert len(kept) == 1, kept
        again = http.post("/v1/episodes", json=_task({"path": "/testbed", "base_commit": up.base}))
        assert again.status_code == 201, again.text
        second = again.json()["id"]
        assert _bash(http, second, "git rev-parse HEAD")["output"] == up.base + "\n"
        assert redis.Redis.from_url(redis_url).keys("proctor:repo:*") == kept
        unfixed = http.post(f"/v1/episodes/{second}/finish").json()
        assert (unfixed["verdict"], unfixed["reward"]) == ("failed", 0.0), unfixed


@pytest.mark.parametrize(
    ("repo", "says"),
    [
        ({"path": "/notrepo", "base_commit": "abcdef1"}, "no `.git`"),
        ({"path": "/nowhere", "base_commit": "abcdef1"}, "has nothing at /nowhere"),
        ({"path": "/testbed", "base_commit": "abcdef1234"}, "is not a commit"),
    ],
)
def test_a_path_that_is_not_the_repository_ends_as_a_task_error(
    baked: tuple[str, str, Upstream], repo: dict[str, Any], says: str
) -> None:
    url, _, _ = baked
    with httpx.Client(base_url=url, timeout=180) as http:
        created = http.post("/v1/episodes", json=_task(repo))
        assert created.status_code in (200, 201), created.text
        result = http.get(f"/v1/episodes/{created.json()['id']}", params={"wait": 60}).json()
        assert result["status"] == "failed", result
        assert (result["verdict"], result["reward"]) == ("task_error", 0.0), result
        assert says in result["reason"], result
        assert result["steps"] == []


def test_a_path_under_the_sandbox_own_mounts_is_refused_at_submission(
    baked: tuple[str, str, Upstream],
) -> None:
    url, _, up = baked
    answer = httpx.post(
        f"{url}/v1/episodes", json=_task({"path": "/workspace/x", "base_commit": up.base})
    )
    assert answer.status_code == 422, answer.text


def test_a_batch_of_one_task_seals_its_repository_once(baked: tuple[str, str, Upstream]) -> None:
    """Four episodes at the same new base, opened at once: one worker seals, the others wait
    for its sealed copy (the service runs two worker processes)."""
    url, _, up = baked
    old = git(up.path, "rev-parse", f"{up.base}~1")
    body = _task({"path": "/testbed", "base_commit": old})
    with httpx.Client(base_url=url, timeout=180) as http:
        answer = http.post("/v1/episodes/batch", json={"episodes": [body] * 4})
        assert answer.status_code in (200, 201, 202), answer.text
        ids = answer.json()["ids"]
        for episode in ids:
            seen = http.get(f"/v1/episodes/{episode}", params={"wait": 5})
            deadline = 120.0
            while seen.json()["status"] in ("queued", "starting") and deadline > 0:
                seen = http.get(f"/v1/episodes/{episode}", params={"wait": 5})
                deadline -= 5
            assert seen.json()["status"] == "running", seen.json()
            assert _bash(http, episode, "git rev-parse HEAD")["output"] == old + "\n"
            http.delete(f"/v1/episodes/{episode}")
    log = (up.path.parent / "service.log").read_text()
    assert log.count(f"at {old} as sha256:") == 1, log[-3000:]
