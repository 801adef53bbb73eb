"""Repositories uploaded once (`POST /v1/repos`) and named by reference, over HTTP with real
sandboxes: the upload is sealed (byte scan), the same bytes are the same reference, an
unknown reference is a 404 at submission, a bomb is refused, and the SDK uploads each
distinct repository once however many episodes carry it."""

from __future__ import annotations

import base64
import gzip
import io
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

import httpx

from proctor.client import Client
from proctor.models import EpisodeCreate, EpisodeMode, RepoSnapshot, TaskSpec, TestSpec
from tests.unit.anticheat.git.test_seal import full_clone
from tests.unit.anticheat.git.zoo import git, scan, upstream

TESTS = {"test_lib.py": "from lib import f\n\n\ndef test_fixed():\n    assert f() == 42\n"}


def _targz(tree: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tree, arcname=".")
    return buffer.getvalue()


def _interactive(repo: dict[str, Any]) -> dict[str, Any]:
    return {
        "mode": "interactive",
        "task": {
            "image": "python",
            "repo": repo,
            "tests": {"files": TESTS},
            "limits": {"timeout_s": 30},
            "policy": {"disabled_rules": ["*"]},
        },
    }


def test_an_upload_is_sealed_once_and_used_by_reference(http: httpx.Client, tmp_path: Path) -> None:
    up = upstream(tmp_path)
    data = _targz(full_clone(up, tmp_path))
    query = {"base_commit": up.base[:12], "branch": "main"}
    first = http.post("/v1/repos", params=query, content=data)
    assert first.status_code == 201, first.text
    ref = first.json()["ref"]
    assert first.json()["base_commit"] == up.base and first.json()["size"] > 0
    assert http.post("/v1/repos", params=query, content=data).json()["ref"] == ref

    created = http.post("/v1/episodes", json=_interactive({"ref": ref}))
    assert created.status_code == 201, created.text
    episode = created.json()["id"]

    def bash(command: str) -> dict[str, Any]:
        step = http.post(
            f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": command}
        )
        assert step.status_code == 200, step.text
        observation: dict[str, Any] = step.json()["observation"]
        return observation

    assert bash("git rev-parse HEAD")["output"] == up.base + "\n"
    pulled = bash("tar czf - -C /workspace . | base64 -w0")
    tree = tmp_path / "seen"
    tree.mkdir()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(pulled["output"])), mode="r:gz") as tar:
        tar.extractall(tree, filter="data")
    assert scan(tree, up.future_objects()) == []
    assert git(tree, "rev-parse", "HEAD") == up.base
    bash("printf 'def f():\\n    return 42\\n' > lib.py")
    finished = http.post(f"/v1/episodes/{episode}/finish").json()
    assert (finished["verdict"], finished["reward"]) == ("passed", 1.0), finished


def test_an_unknown_reference_is_a_404_at_submission(http: httpx.Client) -> None:
    answer = http.post("/v1/episodes", json=_interactive({"ref": "sha256:" + "0" * 64}))
    assert answer.status_code == 404, answer.text
    assert "POST /v1/repos" in answer.json()["error"]["message"]


def test_hostile_uploads_are_refused_quickly(http: httpx.Client) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(compressor.compress(bytes(1 << 20)) for _ in range(2048)) + compressor.flush()
    started = time.monotonic()
    answer = http.post("/v1/repos", params={"base_commit": "abcdef1"}, content=bomb)
    refused_s = time.monotonic() - started
    assert answer.status_code == 422, answer.text
    assert "times its size" in answer.json()["error"]["message"]
    print(f"a {len(bomb) >> 10} KiB gzip of 2 GiB refused in {refused_s * 1000:.0f} ms")
    no_repo = gzip.compress(b"not a tar at all" * 100)
    answer = http.post("/v1/repos", params={"base_commit": "abcdef1"}, content=no_repo)
    assert answer.status_code == 422, answer.text
    answer = http.post("/v1/repos", params={"base_commit": "xyz"}, content=b"")
    assert answer.status_code == 422, answer.text


class _Counting(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


def test_the_sdk_uploads_each_distinct_repository_once(service_url: str, tmp_path: Path) -> None:
    up = upstream(tmp_path)
    archive = base64.b64encode(_targz(full_clone(up, tmp_path))).decode()
    task = TaskSpec(
        repo=RepoSnapshot(archive=archive, base_commit=up.base),
        tests=TestSpec(files=TESTS),
    )
    episode = EpisodeCreate(task=task, mode=EpisodeMode.interactive)
    transport = _Counting()
    with Client(service_url, transport=transport) as client:
        ids = client.create_many([episode] * 3) + client.create_many([episode] * 2)
        for episode_id in ids:
            client.cancel(episode_id)
    assert transport.paths.count("/v1/repos") == 1, transport.paths
    assert len(ids) == 5
