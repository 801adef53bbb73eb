"""Workers and their dependencies: a worker that dies between taking an episode and
starting it, and Redis restarted under busy workers.

Each test has a Redis of its own: a test Redis database when only workers die, a
redis-server on a free port (append-only file on) when Redis itself is restarted.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from core import defaults
from core.config import Settings
from tests.conftest import (
    claimed_database,
    free_port,
    remove_deployment_containers,
    service_env,
    stop,
    wait_ready,
    wait_until,
)
from tests.e2e.helpers import episode
from tests.e2e.test_recovery import live_workers, start

# What a worker sees or says right after it took an episode: RQ's BLPOP reply naming it
# (taken, not yet marked started), and the job's first read of the episode record (RQ has
# marked it started by this worker; the episode is still `queued`).
TAKEN = re.compile(rb"rq:queue:proctor\r\n\$\d+\r\nep_")
MARKED = re.compile(rb"HGETALL\r\n\$\d+\r\nproctor:episode:ep_")


class FreezingRelay:
    """A TCP relay between one worker and Redis. Once `trigger` shows in the traffic, no
    byte the worker sends reaches Redis any more: killing it then leaves Redis exactly as
    a worker killed at that instant would."""

    def __init__(self, redis_port: int, trigger: re.Pattern[bytes]) -> None:
        self.redis_port = redis_port
        self.trigger = trigger
        self.frozen = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                worker, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.redis_port))
            self._sockets += [worker, upstream]
            threading.Thread(target=self._pump, args=(worker, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, worker, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_worker: bool) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                if self.trigger.search(data):
                    self.frozen.set()
                if from_worker and self.frozen.is_set():
                    continue  # the worker is "dead" from here on
                sink.sendall(data)

    def close(self) -> None:
        for sock in self._sockets:
            with suppress(OSError):
                sock.close()


@pytest.mark.parametrize("trigger", [TAKEN, MARKED], ids=["taken-off-the-queue", "marked-started"])
def test_a_worker_killed_before_starting_its_episode_does_not_leave_it_queued(
    docker_ready: None, trigger: re.Pattern[bytes]
) -> None:
    with claimed_database() as redis_url:
        port = free_port()
        env = service_env(redis_url, port, PROCTOR_POOL_SIZE="0")
        ttl_s = float(env["PROCTOR_HEARTBEAT_TTL_S"])
        db = redis_url.rsplit("/", 1)[1]
        relay = FreezingRelay(int(redis_url.rsplit(":", 1)[1].split("/")[0]), trigger)
        # the victim's janitor stays still: its own sweeps must not trip the trigger
        victim_env = {
            **env,
            "PROCTOR_REDIS_URL": f"redis://127.0.0.1:{relay.port}/{db}",
            "PROCTOR_REAPER_INTERVAL_S": "3600",
            "PROCTOR_DEPLOYMENT": Settings(redis_url=redis_url).deployment_id,
        }
        api = start(["serve"], env)
        victim = start(["worker", "--concurrency", "1"], victim_env)
        survivor: subprocess.Popen[bytes] | None = None
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, api, 60, path="/healthz")
            assert wait_until(lambda: live_workers(url) == 1, 120), "the victim never came up"
            response = httpx.post(f"{url}/v1/episodes", json=episode("x = 1\n"))
            assert response.status_code == 202, response.text
            episode_id = response.json()["id"]
            assert relay.frozen.wait(60), "the victim never took the episode"
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            client = redis.Redis.from_url(redis_url)
            assert client.hget(f"proctor:episode:{episode_id}", "status") == b"queued"
            job_status = client.hget(f"rq:job:{episode_id}", "status")
            assert job_status == (b"queued" if trigger is TAKEN else b"started")
            assert client.llen("rq:queue:proctor") == 0  # nobody else will ever take it
            client.close()

            survivor = start(["worker", "--concurrency", "1"], env)
            assert wait_until(lambda: live_workers(url) >= 1, 120), "the survivor never came up"
            ready_at = time.monotonic()

            refusals: list[str] = []  # a loaded machine may answer 503 now and then

            def ended() -> bool:
                answer = httpx.get(f"{url}/v1/episodes/{episode_id}", timeout=30)
                if answer.status_code != 200:
                    refusals.append(f"{answer.status_code} {answer.text[:300]}")
                    return False
                return bool(answer.json()["status"] == "failed")

            # the survivor judges others once it has been up a TTL; then one TTL, one sweep
            assert wait_until(ended, 3 * ttl_s + 10), f"the episode stayed queued {refusals}"
            took_s = time.monotonic() - ready_at
            result = httpx.get(f"{url}/v1/episodes/{episode_id}").json()
            assert (result["verdict"], result["reward"]) == ("infra_error", None), result
            assert "stopped" in result["error"], result["error"]
            print(f"ended {took_s:.1f} s after a survivor was up")
        finally:
            for process in (victim, survivor, api):
                if process is not None:
                    stop(process)
            relay.close()


class RedisServer:
    """A redis-server of the test's own (append-only file on), to restart at will."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # every write on disk before it is acknowledged: a kill -9 loses nothing acknowledged
        with (self.directory / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.directory),
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                    "--protected-mode",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        client = redis.Redis.from_url(self.url)
        try:
            assert wait_until(lambda: _answers(client), 30), "redis-server did not start"
        finally:
            client.close()

    def stop(self, signum: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=60)
        self.process = None


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@contextmanager
def own_redis(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop(signal.SIGKILL)
        remove_deployment_containers(server.url)


SLEEPY_TEST = """\
import time

from solution import add


def test_add():
    time.sleep(3)
    assert add(1, 2) == 3
"""
EPISODES = 6
# longer than redis-py's own retries (~7 s) and the heartbeat TTL (6 s)
DOWN_S = 12


def _get(url: str, episode_id: str) -> dict[str, Any] | None:
    try:
        response = httpx.get(f"{url}/v1/episodes/{episode_id}", timeout=10)
    except httpx.TransportError:
        return None
    if response.status_code != 200:
        return None  # 503 while the API's Redis is away
    record: dict[str, Any] = response.json()
    return record


def _worker_names(server: RedisServer) -> set[str]:
    client = redis.Redis.from_url(server.url)
    try:
        return {str(n, "utf-8") for n in client.zrange("proctor:workers", 0, -1)}  # type: ignore[arg-type]
    finally:
        client.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill-9"])
def test_workers_ride_out_a_redis_restart(docker_ready: None, tmp_path: Path, signum: int) -> None:
    with own_redis(tmp_path) as server:
        port = free_port()
        env = service_env(server.url, port, PROCTOR_POOL_SIZE="0")
        url = f"http://127.0.0.1:{port}"
        api = start(["serve"], env)
        workers = start(["worker", "--concurrency", "2"], env)
        try:
            wait_ready(url, api, 60, path="/healthz")
            assert wait_until(lambda: live_workers(url) == 2, 120), "the workers never came up"
            names = _worker_names(server)
            bodies = [
                episode(f"def add(a, b):\n    return a + b  # {n}\n", tests=SLEEPY_TEST)
                for n in range(EPISODES)
            ]
            response = httpx.post(f"{url}/v1/episodes/batch", json={"episodes": bodies})
            assert response.status_code == 202, response.text
            ids: list[str] = response.json()["ids"]

            def busy() -> bool:
                records = [_get(url, i) for i in ids]
                return sum(1 for r in records if r and r["status"] == "running") >= 2

            assert wait_until(busy, 120), "the workers never got busy"
            server.stop(signum)
            time.sleep(DOWN_S)  # jobs try to write, heartbeats fail, TTLs pass
            server.start()

            def all_ended() -> bool:
                records = [_get(url, i) for i in ids]
                return all(
                    r is not None and r["status"] in ("completed", "failed") for r in records
                )

            assert wait_until(all_ended, 150), [_get(url, i) for i in ids]
            results = [_get(url, i) for i in ids]
            outcomes = [(r["status"], r["verdict"], r["reward"]) for r in results if r]
            assert outcomes == [("completed", "passed", 1.0)] * EPISODES, results
            assert workers.poll() is None, "the worker process exited"
            assert wait_until(lambda: live_workers(url) == 2, 60)
            assert _worker_names(server) == names, "a worker process was replaced"
        finally:
            stop(workers)
            stop(api)


GRADING_S = 5  # the hidden test's own time: Redis goes down while it runs
# past every retry of a worker's Redis client (`REDIS_RETRIES` commands ~1-2 s apart)
LONG_DOWN_S = defaults.REDIS_RETRIES * defaults.REDIS_RETRY_WAIT_S + 10
CORRECT = "def add(a, b):\n    return a + b\n"
SLOW_TEST = SLEEPY_TEST.replace("time.sleep(3)", f"time.sleep({GRADING_S})")


def test_an_interactive_result_rides_out_a_redis_outage(docker_ready: None, tmp_path: Path) -> None:
    """Redis goes away while an interactive episode is graded and stays away past every
    retry of the worker's Redis client: the graded result is written once it is back, as
    a one-shot result is, never turned into infra_error."""
    with own_redis(tmp_path) as server:
        port = free_port()
        env = service_env(server.url, port, PROCTOR_POOL_SIZE="0")
        url = f"http://127.0.0.1:{port}"
        api = start(["serve"], env)
        workers = start(["worker", "--concurrency", "1"], env)
        try:
            wait_ready(url, api, 60, path="/healthz")
            assert wait_until(lambda: live_workers(url) == 1, 120), "the worker never came up"
            body = {
                "mode": "interactive",
                "task": {
                    "image": "python",
                    "tests": {"files": {"test_solution.py": SLOW_TEST}},
                    "limits": {"timeout_s": 30},
                },
            }
            response = httpx.post(f"{url}/v1/episodes", json=body, timeout=120)
            assert response.status_code == 201, response.text
            episode_id = response.json()["id"]
            action = {"type": "write_file", "path": "solution.py", "content": CORRECT}
            answer = httpx.post(f"{url}/v1/episodes/{episode_id}/actions", json=action, timeout=60)
            assert answer.status_code == 200, answer.text

            def finish() -> None:  # its answer is lost with Redis: the record tells
                with suppress(httpx.HTTPError):
                    httpx.post(f"{url}/v1/episodes/{episode_id}/finish", timeout=120)

            threading.Thread(target=finish, daemon=True).start()

            def evaluating() -> bool:
                record = _get(url, episode_id)
                return record is not None and record["status"] == "evaluating"

            assert wait_until(evaluating, 60), _get(url, episode_id)
            server.stop(signal.SIGKILL)
            time.sleep(
                LONG_DOWN_S
            )  # the test ends; writing its result outlasts the client's retries
            server.start()

            def ended() -> bool:
                record = _get(url, episode_id)
                return record is not None and record["status"] in ("completed", "failed")

            assert wait_until(ended, 120), _get(url, episode_id)
            result = _get(url, episode_id)
            assert result is not None
            outcome = (result["status"], result["verdict"], result["reward"])
            assert outcome == ("completed", "passed", 1.0), result
            assert workers.poll() is None, "the worker process exited"
        finally:
            stop(workers)
            stop(api)
