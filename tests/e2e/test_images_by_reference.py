"""Task images by reference through the whole service, against a real registry started here:
episodes at once on a reference never on the host (one pull, every one graded, the digest
recorded), references refused at submission (pattern, scheme, credentials, digest), one
the registry has not (the task's fault, then refused), and a prefetch over HTTP and by
`proctor images prefetch` with its progress."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
import redis

from core import keys
from tests.conftest import REPO_ROOT, claimed_database, running_service, wait_until
from tests.e2e.helpers import TEST_ADD, episode
from tests.registry import Registry, push, running_registry, small_image

pytestmark = pytest.mark.usefixtures("docker_ready")

ADD = "def add(a, b):\n    return a + b\n"
HOST = socket.gethostname()  # the workers' PROCTOR_HOST_ID


class Deployment:
    def __init__(self, url: str, redis_url: str, registry: Registry) -> None:
        self.url = url
        self.redis = redis.Redis.from_url(redis_url)
        self.registry = registry
        self.docker = docker.from_env()
        self.refs: list[str] = []

    def pushed(self, name: str) -> tuple[str, str]:
        """A fresh image pushed to the registry and not on the engine: (reference, digest)."""
        local = small_image(self.docker, f"{name}-{uuid.uuid4().hex}")
        ref = self.registry.ref(f"tasks/{name}", uuid.uuid4().hex[:8])
        try:
            digest = push(self.docker, local, ref)
        finally:
            self.docker.images.remove(local, force=True)
        self.refs.append(ref)
        return ref, digest

    def pulls(self, ref: str) -> int:
        return int(self.redis.hget(keys.image_pulls(HOST), ref) or 0)

    def close(self) -> None:
        for ref in self.refs:
            with suppress(docker.errors.ImageNotFound):
                self.docker.images.remove(ref, force=True)
        self.docker.close()
        self.redis.close()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_registry(Path(tmp)) as registry,
        claimed_database() as redis_url,
    ):
        running: Deployment | None = None
        try:
            with running_service(
                redis_url,
                tmp_path_factory.mktemp("service") / "service.log",
                PROCTOR_IMAGE_ALLOW=f"{registry.host}/tasks/*",
                PROCTOR_PULL_TIMEOUT_S="120",
            ) as url:
                running = Deployment(url, redis_url, registry)
                yield running
        finally:
            if running is not None:  # once the service and its sandboxes are gone
                running.close()


def on(ref: str, solution: str = ADD) -> dict[str, Any]:
    request = episode(solution)
    request["task"]["image"] = ref
    return request


def test_episodes_at_once_on_a_new_reference_make_one_pull(deployment: Deployment) -> None:
    ref, digest = deployment.pushed("concurrent")
    with (
        httpx.Client(base_url=deployment.url, timeout=300) as http,
        ThreadPoolExecutor(4) as pool,
    ):
        # distinct requests (a dedup would share one episode): a comment apart
        bodies = [on(ref, ADD + f"# {n}\n") for n in range(4)]
        answers = list(
            pool.map(lambda b: http.post("/v1/episodes", params={"wait": 240}, json=b), bodies)
        )
    for answer in answers:
        assert answer.status_code == 200, answer.text
        result = answer.json()
        assert result["verdict"] == "passed" and result["reward"] == 1.0, result
        assert result["sandbox"]["image"] == ref
        assert result["sandbox"]["image_digest"] == digest
    assert deployment.pulls(ref) == 1
    # warm: the next one uses the host's copy
    with httpx.Client(base_url=deployment.url, timeout=300) as http:
        again = http.post("/v1/episodes", params={"wait": 240}, json=on(ref, ADD + "# warm\n"))
    assert again.json()["verdict"] == "passed"
    assert deployment.pulls(ref) == 1


@pytest.mark.parametrize(
    "image",
    [
        "{host}/elsewhere/x:1",  # outside the deployment's patterns
        "127.0.0.2:5000/tasks/x:1",
        "http://{host}/tasks/x:1",  # a scheme
        "user:secret@{host}/tasks/x:1",  # credentials
        "{host}/tasks/x@sha256:1234",  # a malformed digest
    ],
)
def test_references_refused_at_submission(deployment: Deployment, image: str) -> None:
    ref = image.format(host=deployment.registry.host)
    answer = httpx.post(f"{deployment.url}/v1/episodes", json=on(ref))
    assert answer.status_code == 422, answer.text


def test_an_image_the_registry_has_not_is_the_tasks_fault_then_refused(
    deployment: Deployment,
) -> None:
    ref = deployment.registry.ref("tasks/never-pushed", uuid.uuid4().hex[:8])
    with httpx.Client(base_url=deployment.url, timeout=300) as http:
        answer = http.post("/v1/episodes", params={"wait": 240}, json=on(ref))
        assert answer.status_code == 200, answer.text
        result = answer.json()
        assert result["status"] == "failed"
        assert result["verdict"] == "task_error"
        assert result["reward"] == 0.0  # a reward: not our infrastructure's failure
        assert result["error"] is None
        assert "manifest unknown" in result["reason"]
        again = http.post("/v1/episodes", json=on(ref))
        assert again.status_code == 422, again.text
        assert again.json()["error"]["type"] == "ImageNotFound"


def test_a_prefetch_warms_the_hosts_with_progress(deployment: Deployment) -> None:
    ref, _ = deployment.pushed("prefetched")
    missing = deployment.registry.ref("tasks/never-pushed-either", uuid.uuid4().hex[:8])
    with httpx.Client(base_url=deployment.url, timeout=60) as http:
        started = http.post("/v1/images/prefetch", json={"images": [ref, missing, ref]})
        assert started.status_code == 202, started.text
        status = started.json()
        assert status["images"] == [ref, missing] and status["hosts"] == [HOST]
        assert status["total"] == 2

        def complete() -> bool:
            nonlocal status
            status = http.get(f"/v1/images/prefetch/{status['id']}").json()
            return bool(status["complete"])

        assert wait_until(complete, 240), status
        states = {p["image"]: p["state"] for p in status["pulls"]}
        assert states == {ref: "pulled", missing: "not_found"}
        assert deployment.pulls(ref) == 1
        refused = http.post("/v1/images/prefetch", json={"images": ["127.0.0.2:1/x/y:z"]})
        assert refused.status_code == 422
        assert http.get("/v1/images/prefetch/nope").status_code == 404
    # an episode on it now finds it on the host: no second pull
    with httpx.Client(base_url=deployment.url, timeout=300) as http:
        result = http.post("/v1/episodes", params={"wait": 240}, json=on(ref)).json()
    assert result["verdict"] == "passed"
    assert deployment.pulls(ref) == 1


def test_proctor_images_prefetch_reads_a_dataset(deployment: Deployment, tmp_path: Path) -> None:
    ref, _ = deployment.pushed("from-cli")
    dataset = tmp_path / "dataset.jsonl"
    rows = [on(ref), on(ref, ADD + "# 2\n"), episode(ADD)]  # the last: a deployment name
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = subprocess.run(
        [sys.executable, "-m", "proctor.cli", "images", "prefetch", str(dataset)],
        env={"PROCTOR_URL": deployment.url, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 images on 1 hosts" in done.stdout
    assert "pulled=1" in done.stdout
    assert deployment.pulls(ref) == 1


def test_an_interactive_episode_on_a_reference(deployment: Deployment) -> None:
    ref, digest = deployment.pushed("interactive")
    body = {
        "mode": "interactive",
        "task": {
            "image": ref,
            "files": {"solution.py": "def add(a, b):\n    return 0\n"},
            "tests": {"files": {"test_solution.py": TEST_ADD}},
            "limits": {"timeout_s": 30},
        },
    }
    with httpx.Client(base_url=deployment.url, timeout=300) as http:
        created = http.post("/v1/episodes", json=body)
        assert created.status_code == 201, created.text
        episode_id = created.json()["id"]
        marker = http.post(
            f"/v1/episodes/{episode_id}/actions", json={"type": "bash", "command": "cat /marker"}
        )
        assert marker.status_code == 200, marker.text
        assert marker.json()["observation"]["output"].startswith("interactive-")
        fixed = {"type": "write_file", "path": "solution.py", "content": ADD}
        assert http.post(f"/v1/episodes/{episode_id}/actions", json=fixed).status_code == 200
        result = http.post(f"/v1/episodes/{episode_id}/finish").json()
    assert result["verdict"] == "passed", result
    assert result["sandbox"]["image"] == ref and result["sandbox"]["image_digest"] == digest
    assert deployment.pulls(ref) == 1
