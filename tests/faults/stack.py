"""A Proctor stack of its own for fault injection: a private redis-server (append-only
file on), the API and the workers as separate processes, so each can be killed and
restarted on its own while the others are left alone.

Every process here was started by this module and is ended by its PID (or its session's
process group); nothing is found or killed by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis
from redis import Redis

from tests.conftest import (
    REPO_ROOT,
    free_port,
    remove_deployment_containers,
    service_env,
    stop,
    wait_ready,
    wait_until,
)
from tests.e2e.helpers import episode

WORKERS = 2
API_START_S = 60
WORKERS_START_S = 120
CORRECT_ADD = "def add(a, b):\n    return a + b\n"
WORKERS_KEY = "proctor:workers"
QUEUE_KEY = "rq:queue:proctor"


def add_episode(n: int, *, sleep_s: float = 0.0) -> dict[str, Any]:
    """A correct a+b solution and one assert: reward 1.0 unless our infrastructure fails.

    `n` makes every request distinct (a retry sends an idempotency key);
    `sleep_s` keeps the episode running long enough to be hit by a fault.
    """
    lines = ["import time", "from solution import add", "", "", "def test_add():"]
    if sleep_s:
        lines.append(f"    time.sleep({sleep_s})")
    lines.append(f"    assert add({n}, 1) == {n + 1}")
    return episode(CORRECT_ADD, tests="\n".join(lines) + "\n", timeout_s=30)


class RedisServer:
    """redis-server on a free port with its data in `directory`; restartable in place."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "redis.log"
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (run `make setup`)")
        with self.log_path.open("ab") as log:
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
                    "--save",
                    "",
                    "--protected-mode",
                    "no",
                    "--daemonize",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        client = redis.Redis.from_url(self.url, socket_timeout=2)
        try:
            if not wait_until(lambda: _pings(client), 30):
                raise RuntimeError(f"redis-server did not answer; see {self.log_path}")
        finally:
            client.close()

    def shutdown(self) -> None:
        """The clean way down: SIGTERM makes Redis flush its append-only file and exit."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)

    def kill(self) -> None:
        """The crash: SIGKILL, no flush (what was written to the file is what survives)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "proctor.cli", *args],
            env=env,
            cwd=REPO_ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _end(process: subprocess.Popen[bytes] | None) -> None:
    """Stop a process we started, then anything left in its session (its children)."""
    if process is None:
        return
    stop(process)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def parent_pid(pid: int) -> int | None:
    """The parent of a live process; None when it is gone or a zombie (dead, not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state, ppid = handle.read().rsplit(")", 1)[1].split()[:2]
    except (OSError, ValueError):
        return None
    return None if state in ("Z", "X") else int(ppid)


@dataclass
class Stack:
    """Redis, the API and the workers of one scenario, each restartable alone."""

    directory: Path
    settings: dict[str, str] = field(default_factory=dict)
    redis: RedisServer = field(init=False)
    port: int = field(init=False)
    env: dict[str, str] = field(init=False)
    api: subprocess.Popen[bytes] | None = None
    workers: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.redis = RedisServer(self.directory / "redis")
        self.port = free_port()
        # network none: these scenarios are about Redis, processes and queues, and a
        # honeypot per stack would only add engine work on a shared host
        self.env = service_env(
            self.redis.url,
            self.port,
            PROCTOR_NETWORK="none",
            PROCTOR_WORKER_CONCURRENCY=str(WORKERS),
            **self.settings,
        )
        self.env.pop("PROCTOR_JUDGE_URL", None)  # rule filter only: no judge in these runs

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Redis:
        return redis.Redis.from_url(self.redis.url, socket_timeout=5, decode_responses=True)

    def start(self) -> None:
        self.redis.start()
        self.start_api()
        self.workers = _start(
            ["worker", "--concurrency", str(WORKERS)], self.env, self.directory / "workers.log"
        )
        wait_ready(self.url, self.workers, WORKERS_START_S)
        if not wait_until(lambda: len(self.live_workers()) >= WORKERS, WORKERS_START_S):
            raise RuntimeError(f"{WORKERS} workers did not start; see {self.directory}")

    def start_api(self) -> None:
        self.api = _start(["serve"], self.env, self.directory / "api.log")
        wait_ready(self.url, self.api, API_START_S, path="/healthz")

    def restart_api(self, *, grace_s: float = 10.0) -> bool:
        """SIGTERM the API, SIGKILL it if it is not gone in `grace_s`, start a new one.

        Returns whether it went down gracefully in time.
        """
        assert self.api is not None
        self.api.send_signal(signal.SIGTERM)
        graceful = True
        try:
            self.api.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            graceful = False
            with suppress(ProcessLookupError):
                os.killpg(self.api.pid, signal.SIGKILL)
            self.api.wait()
        self.start_api()
        return graceful

    def workers_gone(self) -> str | None:
        """Why no worker can end episodes any more, or None while the worker process lives."""
        if self.workers is not None and self.workers.poll() is not None:
            return f"the worker process exited ({self.workers.returncode}) and was not restarted"
        return None

    def live_workers(self) -> list[str]:
        ttl = float(self.env["PROCTOR_HEARTBEAT_TTL_S"])
        try:
            with self.client() as client:
                return list(client.zrangebyscore(WORKERS_KEY, time.time() - ttl, "+inf"))
        except redis.RedisError:
            return []

    def worker_children(self) -> list[int]:
        """PIDs of the live worker processes `proctor worker` runs: children that heartbeat
        (not its helpers, not dead ones)."""
        assert self.workers is not None
        named = {int(w.rsplit(".", 3)[1]) for w in self.live_workers()}
        return sorted(pid for pid in named if parent_pid(pid) == self.workers.pid)

    def full_capacity(self, within_s: float) -> bool:
        """All worker processes are back (alive and heartbeating), however it got there."""
        return wait_until(lambda: len(self.worker_children()) >= WORKERS, within_s)

    def episode_fields(self, episode_id: str, *names: str) -> list[str | None]:
        with self.client() as client:
            return list(client.hmget(f"proctor:episode:{episode_id}", list(names)))

    def close(self) -> None:
        _end(self.api)
        _end(self.workers)
        self.redis.close()
        remove_deployment_containers(self.redis.url)

    def logs(self) -> str:
        return str(self.directory)


def submit(http: httpx.Client, body: dict[str, Any], *, within_s: float = 30) -> str:
    """POST one episode, retrying what a trainer retries (transport errors, 5xx)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            response = http.post("/v1/episodes", json=body)
            if response.status_code in (200, 202):
                return str(response.json()["id"])
            problem = f"{response.status_code} {response.text[:200]}"
            if response.status_code < 500 and response.status_code != 429:
                raise AssertionError(f"the API refused a valid episode: {problem}")
        except httpx.TransportError as exc:
            problem = str(exc)
        if time.monotonic() > deadline:
            raise AssertionError(f"no episode accepted within {within_s}s: {problem}")
        time.sleep(0.5)


def tail(path: Path, lines: int = 30) -> str:
    with suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
