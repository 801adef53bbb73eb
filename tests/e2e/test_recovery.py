"""A worker killed mid-episode: the episode still ends, and its container goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import docker
import httpx
import pytest

from tests.conftest import (
    REPO_ROOT,
    claimed_database,
    free_port,
    service_env,
    stop,
    wait_ready,
    wait_until,
)
from tests.e2e.helpers import episode

SLOW_TEST = "import time\n\ndef test_slow():\n    time.sleep(60)\n"


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "proctor.cli", *args], env=env, cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture
def split_service(docker_ready: None) -> Iterator[tuple[str, dict[str, str]]]:
    """An API alone on a database of its own: the test starts and kills its workers."""
    with claimed_database() as redis_url:
        port = free_port()
        env = service_env(redis_url, port, PROCTOR_POOL_SIZE="0")
        api = start(["serve"], env)
        try:
            wait_ready(f"http://127.0.0.1:{port}", api, 30, path="/healthz")
            yield f"http://127.0.0.1:{port}", env
        finally:
            stop(api)


def test_sigkilled_worker_leaves_no_episode_or_container_behind(
    split_service: tuple[str, dict[str, str]],
) -> None:
    url, env = split_service
    engine = docker.from_env()
    worker = start(["worker", "--concurrency", "1"], env)
    replacement: subprocess.Popen[bytes] | None = None
    try:
        wait_ready(url, worker, 60)
        episode_id = httpx.post(f"{url}/v1/episodes",
                                json=episode("x = 1\n", tests=SLOW_TEST, timeout_s=90)).json()["id"]
        assert wait_until(lambda: httpx.get(f"{url}/v1/episodes/{episode_id}").json()["status"]
                        == "running", 60)
        record = httpx.get(f"{url}/v1/episodes/{episode_id}").json()
        assert record["status"] == "running"

        def containers() -> list[dict[str, object]]:
            listed = engine.api.containers(all=True, filters={"label": "org.proctor.managed=1"})
            return [c for c in listed
                    if c["Labels"].get("org.proctor.worker", "").rsplit(".", 3)[1]
                    == str(worker.pid)]

        assert containers(), "the episode's container should exist while it runs"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()

        # a worker that comes back (or any other live one) ends it and reaps the container
        replacement = start(["worker", "--concurrency", "1"], env)
        assert wait_until(
            lambda: httpx.get(f"{url}/v1/episodes/{episode_id}").json()["status"] == "failed", 60
        )
        result = httpx.get(f"{url}/v1/episodes/{episode_id}").json()
        assert result["verdict"] == "infra_error" and result["reward"] is None
        assert "stopped" in result["error"]
        assert wait_until(lambda: not containers(), 60), "the dead worker's container remains"
    finally:
        for process in (worker, replacement):
            if process is not None:
                stop(process)
        engine.close()
