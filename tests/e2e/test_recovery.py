"""A worker killed mid-episode: the episode still ends, its container goes away, and a
worker process that dies under a supervisor is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import docker
import httpx
import pytest
import redis

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
    return subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


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
        episode_id = httpx.post(
            f"{url}/v1/episodes", json=episode("x = 1\n", tests=SLOW_TEST, timeout_s=90)
        ).json()["id"]
        assert wait_until(
            lambda: httpx.get(f"{url}/v1/episodes/{episode_id}").json()["status"] == "running", 60
        )
        record = httpx.get(f"{url}/v1/episodes/{episode_id}").json()
        assert record["status"] == "running"

        def containers() -> list[dict[str, object]]:
            listed = engine.api.containers(all=True, filters={"label": "org.proctor.managed=1"})
            return [
                c
                for c in listed  # (the honeypot and others' sandboxes have no owner)
                if c["Labels"].get("org.proctor.worker", "").rsplit(".", 3)[1:2]
                == [str(worker.pid)]
            ]

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


def worker_pid(name: str) -> int:
    """The PID in a worker name (`host.pid.start.suffix`)."""
    return int(name.rsplit(".", 3)[1])


def live_workers(url: str) -> int:
    """How many workers `/readyz` counts as able to run episodes."""
    try:
        checks = httpx.get(f"{url}/readyz", timeout=10).json()["checks"]
    except httpx.TransportError:
        return 0
    return int(checks.get("workers", 0)) - len(checks.get("worker_problems", {}))


def test_a_killed_worker_child_ends_its_episode_and_is_replaced(
    split_service: tuple[str, dict[str, str]],
) -> None:
    """The second child is the one `join()` in order never reaped: kill that one."""
    url, env = split_service
    ttl_s = float(env["PROCTOR_HEARTBEAT_TTL_S"])
    workers = start(["worker", "--concurrency", "2"], env)
    ids: list[str] = []
    try:
        assert wait_until(lambda: live_workers(url) == 2, 120), "two workers never came up"
        for n in range(2):
            body = episode(f"x = {n}\n", tests=SLOW_TEST, timeout_s=90)
            response = httpx.post(f"{url}/v1/episodes", json=body)
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])

        def records() -> list[dict[str, object]]:
            return [httpx.get(f"{url}/v1/episodes/{i}").json() for i in ids]

        def running() -> bool:
            return all(r["status"] == "running" for r in records())

        assert wait_until(running, 120), records()
        redis_client = redis.Redis.from_url(env["PROCTOR_REDIS_URL"])
        owners = {
            i: str(redis_client.hget(f"proctor:episode:{i}", "worker"), "utf-8")  # type: ignore[arg-type]
            for i in ids
        }
        redis_client.close()
        victim = max(ids, key=lambda i: worker_pid(owners[i]))  # the child started second
        survivor = next(i for i in ids if i != victim)
        os.kill(worker_pid(owners[victim]), signal.SIGKILL)
        killed_at = time.monotonic()

        def victim_ended() -> bool:
            return bool(httpx.get(f"{url}/v1/episodes/{victim}").json()["status"] == "failed")

        assert wait_until(victim_ended, ttl_s + 30)
        took_s = time.monotonic() - killed_at
        result = httpx.get(f"{url}/v1/episodes/{victim}").json()
        assert (result["verdict"], result["reward"]) == ("infra_error", None)
        assert took_s <= ttl_s, f"the episode ended {took_s:.1f} s after its worker died"
        assert httpx.get(f"{url}/v1/episodes/{survivor}").json()["status"] == "running"
        # the dead child is reaped (no zombie keeps its name alive) and replaced
        assert not os.path.exists(f"/proc/{worker_pid(owners[victim])}")
        assert wait_until(lambda: live_workers(url) == 2, 120), "the child was not replaced"
    finally:
        for episode_id in ids:  # a cancel stops the 60 s test: the workers stop at once
            httpx.delete(f"{url}/v1/episodes/{episode_id}")
        stop(workers)
