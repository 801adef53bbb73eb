"""Shared fixtures: a real Redis, a real Docker engine, and a real running service.

Integration and end-to-end tests never fake Redis or Docker. They use a dedicated Redis
database (flushed at the start) so a developer's local data is left alone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
import redis

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TEST_REDIS = os.environ.get("PROCTOR_TEST_REDIS", "redis://127.0.0.1:6379")
TEST_DBS = range(15, 0, -1)  # database 0 is left to whoever runs Proctor here
LOCK_KEY = "proctor-test:lock"
SERVICE_START_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def remove_deployment_containers(redis_url: str) -> None:
    """What a test deployment leaves on the engine: its honeypot and any sandbox the
    workers had no time to remove."""
    import docker
    from docker.errors import DockerException

    from core.config import Settings

    deployment = Settings(redis_url=redis_url).deployment_id
    try:
        client = docker.from_env()
    except DockerException:
        return  # no engine: nothing can be left on it
    try:
        leftovers = client.api.containers(
            all=True, filters={"label": f"org.proctor.deployment={deployment}"}
        )
        names = [f"proctor-honeypot-{deployment}"] + [c["Id"] for c in leftovers]
        for name in names:
            with suppress(DockerException):  # already gone
                client.api.remove_container(name, force=True)
        # each sandbox's own network; with its sandbox and the honeypot gone it is empty
        for network in client.api.networks(
            filters={
                "label": ["org.proctor.sandbox-network", f"org.proctor.deployment={deployment}"]
            }
        ):
            with suppress(DockerException):
                client.api.remove_network(network["Id"])
    finally:
        client.close()


def emptied(client: redis.Redis) -> None:
    """Delete every key of a claimed database but its claim (a FLUSHDB would release it, and
    another session or fixture would take the database while it is in use)."""
    for key in client.scan_iter(count=1000):
        if key != LOCK_KEY.encode():
            client.delete(key)


@contextmanager
def claimed_database() -> Iterator[str]:
    """A Redis database nobody else is using (test sessions may run side by side)."""
    for db in TEST_DBS:
        url = f"{TEST_REDIS}/{db}"
        client = redis.Redis.from_url(url)
        try:
            claimed = client.set(LOCK_KEY, os.getpid(), nx=True, ex=7200)
        except redis.RedisError as exc:
            pytest.fail(f"Redis is not reachable at {TEST_REDIS} ({exc}); run `make setup`")
        if claimed:
            emptied(client)
            try:
                yield url
            finally:
                remove_deployment_containers(url)
                client.delete(LOCK_KEY)
                client.close()
            return
        client.close()
    pytest.fail("every test Redis database is in use by another test session")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with claimed_database() as url:
        yield url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def quiet_redis() -> Iterator[redis.Redis]:
    """A database of its own, for a test that reads what workers write: the session's
    real workers heartbeat and end episodes into the session's database, which moves the
    live-worker count and the measured pace behind the test's back."""
    with claimed_database() as url, redis.Redis.from_url(url) as client:
        yield client


@pytest.fixture(scope="session")
def docker_ready() -> None:
    import docker

    try:
        client = docker.from_env()
        client.ping()
        client.images.get("proctor/sandbox-python:latest")
    except Exception as exc:
        pytest.fail(f"Docker or the sandbox image is not ready ({exc}); run `make images`")


# PROCTOR_TEST_RUNTIME=runsc: the services the tests start run their sandboxes under that
# OCI runtime (gVisor's netstack gets no network here: see docs/isolation.md)
RUNTIME_SETTINGS = (
    {"PROCTOR_RUNTIME": os.environ["PROCTOR_TEST_RUNTIME"], "PROCTOR_NETWORK": "none"}
    if os.environ.get("PROCTOR_TEST_RUNTIME")
    else {}
)


def service_env(redis_url: str, port: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PROCTOR_REDIS_URL": redis_url,
            "PROCTOR_PORT": str(port),
            "PROCTOR_HOST": "127.0.0.1",
            "PROCTOR_WORKER_CONCURRENCY": "2",
            "PROCTOR_POOL_SIZE": "1",
            "PROCTOR_HEARTBEAT_S": "1",
            "PROCTOR_HEARTBEAT_TTL_S": "6",
            "PROCTOR_REAPER_INTERVAL_S": "2",
            # the wait bound refuses by the measured drain rate, which a shared 2-core test
            # host moves at random: tests of the bound set it (tests/e2e/test_overload.py)
            "PROCTOR_MAX_QUEUE_WAIT_S": "0",
            **RUNTIME_SETTINGS,
            **extra,
        }
    )
    return env


def wait_ready(
    url: str, process: subprocess.Popen[bytes], timeout_s: float, *, path: str = "/readyz"
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the service exited with {process.returncode} while starting")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the service at {url} was not ready within {timeout_s}s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def running_api(redis_url: str, **settings: str) -> Iterator[str]:
    """`proctor serve` alone (no workers) on a free port; stopped on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "serve"],
        env=service_env(redis_url, port, **settings),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, 30, path="/healthz")
        yield url
    finally:
        stop(process)


@contextmanager
def running_service(redis_url: str, log: Path | None = None, **settings: str) -> Iterator[str]:
    """`proctor run` (API + 2 worker processes) on a free port; stopped on exit."""
    port = free_port()
    sink = log.open("wb") if log else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "run"],
        env=service_env(redis_url, port, **settings),
        stdout=sink,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    if log:
        SERVICE_LOGS[url] = log
    try:
        wait_ready(url, process, SERVICE_START_S)
        yield url
    finally:
        stop(process)
        if log:
            sink.close()  # type: ignore[union-attr]
            sys.stderr.write(f"\nservice log: {log}\n")


@pytest.fixture(scope="module", params=["container", "pooled"])
def service_of_each_mode(
    request: pytest.FixtureRequest, docker_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A module's service in each isolation mode in turn (its `service_url` returns it), with
    a Redis database of its own and its log kept."""
    log = tmp_path_factory.mktemp(request.param) / "service.log"
    with (
        claimed_database() as redis_url,
        running_service(redis_url, log, PROCTOR_ISOLATION=request.param) as url,
    ):
        yield url


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


# the logs of the services tests started, by URL: a failed test that used one reports
# that log's complaints
SERVICE_LOGS: dict[str, Path] = {}
LOG_PROBLEMS = (" WARNING ", " ERROR ", " CRITICAL ", "Traceback")


def log_problems(log: Path, last: int = 60) -> str:
    """The warnings and errors a service logged (the last `last` lines of them)."""
    with suppress(OSError), log.open(errors="replace") as lines:
        return "".join([line for line in lines if any(p in line for p in LOG_PROBLEMS)][-last:])
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.failed:
        used = getattr(item, "funcargs", {}).values()
        for url in dict.fromkeys(v for v in used if isinstance(v, str) and v in SERVICE_LOGS):
            problems = log_problems(SERVICE_LOGS[url]) or "(none)"
            report.sections.append((f"the warnings and errors of the service at {url}", problems))
    return report


@pytest.fixture(scope="session")
def service_url(
    redis_url: str, docker_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("service") / "service.log"
    with running_service(redis_url, log) as url:
        yield url


@pytest.fixture
def http(service_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service_url, timeout=120) as client:
        yield client


# the judge fixtures live with the local judge server they start
from tests.judge_server import judge_url  # noqa: E402, F401
