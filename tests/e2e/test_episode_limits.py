"""Episodes that end elsewhere lose their sandbox: interactive ones left idle end as
`timeout`; cancelled ones, interactive or one-shot, stop running at once."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import httpx
import pytest

from core.config import Settings
from tests.conftest import claimed_database, running_service, wait_until
from tests.e2e.helpers import episode
from tests.e2e.test_interactive import bash, repo, start, task  # noqa: F401
from workers.sandbox.engine import HOLDER_LABEL


@pytest.fixture(scope="module")
def impatient_service(docker_ready: None) -> Iterator[tuple[httpx.Client, str]]:
    """A service whose interactive episodes may idle for 3 s; no warm pool and a fresh
    container per one-shot episode (a pooled sandbox outlives its episodes), so every
    container of its deployment belongs to an episode."""
    with (
        claimed_database() as redis_url,
        running_service(
            redis_url,
            PROCTOR_INTERACTIVE_IDLE_S="3",
            PROCTOR_REAPER_INTERVAL_S="1",
            PROCTOR_WORKER_CONCURRENCY="1",
            PROCTOR_POOL_SIZE="0",
            PROCTOR_ISOLATION="container",
        ) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        yield client, Settings(redis_url=redis_url).deployment_id


@pytest.fixture
def impatient(impatient_service: tuple[httpx.Client, str]) -> httpx.Client:
    return impatient_service[0]


def container_exists(container_id: str) -> bool:
    client = docker.from_env()
    try:
        return bool(client.api.containers(all=True, filters={"id": container_id}))
    finally:
        client.close()


def test_an_idle_episode_ends_as_timeout_and_its_container_goes(
    impatient: httpx.Client, repo: dict[str, str]
) -> None:
    episode_id, _ = start(impatient, task(repo))
    bash(impatient, episode_id, "echo working")
    assert impatient.get(f"/v1/episodes/{episode_id}").json()["status"] == "running"
    result = impatient.get(f"/v1/episodes/{episode_id}", params={"wait": 30}).json()
    assert (result["status"], result["verdict"], result["reward"]) == ("completed", "timeout", 0.0)
    assert "abandoned" in result["reason"] and len(result["steps"]) == 1
    late = impatient.post(
        f"/v1/episodes/{episode_id}/actions", json={"type": "bash", "command": "echo late"}
    )
    assert late.status_code == 409


def test_cancel_removes_the_container(impatient: httpx.Client, repo: dict[str, str]) -> None:
    episode_id, _ = start(impatient, task(repo, disabled=["*"]))
    # the sandbox's own cgroup names its container
    cgroup = bash(impatient, episode_id, "cat /proc/self/cgroup")["output"]
    container_id = next(
        part for line in cgroup.splitlines() for part in line.split("/") if len(part) == 64
    )
    assert container_exists(container_id)
    assert impatient.delete(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
    assert wait_until(lambda: not container_exists(container_id), 20)
    assert impatient.get(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"


def test_cancelling_a_running_oneshot_stops_its_sandbox(
    impatient_service: tuple[httpx.Client, str],
) -> None:
    client, deployment = impatient_service
    slow = episode(
        "x = 1\n", tests="import time\n\ndef test_slow():\n    time.sleep(60)\n", timeout_s=90
    )
    episode_id = client.post("/v1/episodes", json=slow).json()["id"]
    assert wait_until(
        lambda: client.get(f"/v1/episodes/{episode_id}").json()["status"] == "running", 60
    )

    def sandboxes() -> list[object]:
        """The deployment's running sandboxes (not the network holders they join, which
        stay for the next sandbox)."""
        engine = docker.from_env()
        try:
            listed = engine.api.containers(
                filters={"label": f"org.proctor.deployment={deployment}"}
            )
            return [c for c in listed if HOLDER_LABEL not in (c.get("Labels") or {})]
        finally:
            engine.close()

    assert wait_until(lambda: len(sandboxes()) == 1, 10)
    assert client.delete(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
    assert wait_until(lambda: not sandboxes(), 15), "the cancelled episode's sandbox still runs"
    assert client.get(f"/v1/episodes/{episode_id}").json()["status"] == "cancelled"
