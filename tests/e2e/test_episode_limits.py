"""Interactive episodes left alone end as `timeout`; cancelled ones lose their container."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import docker
import httpx
import pytest

from tests.conftest import REPO_ROOT, claimed_database, free_port, service_env, stop, wait_ready
from tests.e2e.test_interactive import bash, repo, start, task  # noqa: F401


@pytest.fixture(scope="module")
def impatient(docker_ready: None) -> Iterator[httpx.Client]:
    """A service whose interactive episodes may idle for 3 s."""
    with claimed_database() as redis_url:
        port = free_port()
        env = service_env(redis_url, port, PROCTOR_INTERACTIVE_IDLE_S="3",
                          PROCTOR_REAPER_INTERVAL_S="1", PROCTOR_WORKER_CONCURRENCY="1")
        process = subprocess.Popen([sys.executable, "-m", "proctor.cli", "run"], env=env,
                                   cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process, 120)
            with httpx.Client(base_url=url, timeout=120) as client:
                yield client
        finally:
            stop(process)


def container_exists(container_id: str) -> bool:
    client = docker.from_env()
    try:
        return bool(client.api.containers(all=True, filters={"id": container_id}))
    finally:
        client.close()


def wait_until(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.25)
    return False


def test_an_idle_episode_ends_as_timeout_and_its_container_goes(
    impatient: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id, _ = start(impatient, task(repo))
    bash(impatient, episode_id, "echo working")
    assert impatient.get(f"/v1/episodes/{episode_id}").json()["status"] == "running"
    result = impatient.get(f"/v1/episodes/{episode_id}", params={"wait": 30}).json()
    assert (result["status"], result["verdict"], result["reward"]) == ("completed", "timeout", 0.0)
    assert "abandoned" in result["reason"] and len(result["steps"]) == 1
    late = impatient.post(f"/v1/episodes/{episode_id}/actions",
                          json={"type": "bash", "command": "echo late"})
    assert late.status_code == 409


def test_cancel_removes_the_container(impatient: httpx.Client, repo: dict[str, str]) -> None:
    episode_id, _ = start(impatient, task(repo, disabled=["*"]))
    # the sandbox's own cgroup names its container
    cgroup = bash(impatient, episode_id, "cat /proc/self/cgroup")["output"]
    container_id = next(part for line in cgroup.splitlines() for part in line.split("/")
                        if len(part) == 64)
    assert container_exists(container_id)
    assert impatient.delete(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
    assert wait_until(lambda: not container_exists(container_id), 20)
    assert impatient.get(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
