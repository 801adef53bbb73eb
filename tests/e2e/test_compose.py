"""The compose stack end to end: `make up`, episodes over HTTP, a second worker host, bad
workers, a Redis crash, a killed worker container, and `make down`.

The stack gets a project name and an API port of its own, so a developer's stack (project
`proctor`, port 8000) and other test sessions on the same engine are left alone. The tests
run in file order and share one stack; each leaves it ready for the next, and the last one
takes it down. Everything made here is removed at the end, the data volume included.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import docker
import httpx
import pytest
from docker.models.containers import Container

from tests.conftest import REPO_ROOT, free_port
from tests.e2e.helpers import episode, run

pytestmark = [pytest.mark.compose, pytest.mark.timeout(900)]

UP_TIMEOUT_S = 600  # a cold `make up` builds the service and Redis images first
SLOW_TEST = "import time\n\ndef test_slow():\n    time.sleep(40)\n"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
HIDDEN_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
# Short heartbeats, so a killed worker is noticed in seconds rather than half a minute.
STACK_SETTINGS = {
    "PROCTOR_WORKERS": "2",
    "PROCTOR_WORKER_CONCURRENCY": "1",
    "PROCTOR_POOL_SIZE": "1",
    "PROCTOR_HEARTBEAT_S": "1",
    "PROCTOR_HEARTBEAT_TTL_S": "6",
    "PROCTOR_REAPER_INTERVAL_S": "2",
}


@dataclass
class Stack:
    project: str
    url: str
    env: dict[str, str]
    redis_url: str  # as the containers see it
    up_s: float

    @property
    def deployment(self) -> str:
        return hashlib.sha256(self.redis_url.encode()).hexdigest()[:12]

    @property
    def network(self) -> str:
        return f"{self.project}_default"

    @property
    def sandbox_network(self) -> str:
        return f"{self.project}_sandbox"


def make(target: str, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["make", target],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout_s,
    )
    sys.stderr.write(f"\n--- make {target} (exit {result.returncode})\n{result.stdout}\n")
    return result


def clean_environment() -> dict[str, str]:
    """The caller's environment without its Proctor and compose settings: a developer's
    PROCTOR_REDIS_URL or COMPOSE_PROFILES must not leak into the test stack."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PROCTOR_", "COMPOSE_"))}


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="module")
def stack(engine: docker.DockerClient) -> Iterator[Stack]:
    project = f"proctor-e2e-{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    env = (
        clean_environment()
        | STACK_SETTINGS
        | {
            "PROCTOR_COMPOSE_PROJECT": project,
            "PROCTOR_PORT": str(free_port()),
            "PROCTOR_SANDBOXFUSION_PORT": str(free_port()),
            "PROCTOR_REDIS_PASSWORD": password,
            "PROCTOR_UP_TIMEOUT_S": "180",
        }
    )
    redis_url = f"redis://:{password}@{project}-redis:6379/0"
    started = time.monotonic()
    try:
        up = make("up", env, UP_TIMEOUT_S)
        assert up.returncode == 0, "make up failed"
        url = f"http://127.0.0.1:{env['PROCTOR_PORT']}"
        assert f"Proctor is up at {url}" in up.stdout
        yield Stack(project, url, env, redis_url, time.monotonic() - started)
    finally:
        make("down", env, 120)
        for volume in engine.volumes.list(
            filters={"label": f"com.docker.compose.project={project}"}
        ):
            volume.remove(force=True)


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A repository whose base commit has a bug; the hidden test wants it fixed."""
    path = tmp_path_factory.mktemp("repo")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(path),
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=path, env=env, check=True, text=True, capture_output=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    (path / "calc.py").write_text(BUGGY)
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(path, arcname=".")
    return {
        "archive": base64.b64encode(buffer.getvalue()).decode(),
        "base": git("rev-parse", "HEAD"),
    }


def interactive(repo: dict[str, str]) -> dict[str, Any]:
    return {
        "mode": "interactive",
        "task": {
            "image": "python",
            "repo": {"archive": repo["archive"], "base_commit": repo["base"]},
            "tests": {
                "files": {"tests/test_hidden.py": HIDDEN_TEST},
                "fail_to_pass": ["tests/test_hidden.py::test_add"],
                "command": "python3 -I -m pytest -q tests",
            },
            "limits": {"timeout_s": 30},
        },
    }


def start(http: httpx.Client, body: dict[str, Any]) -> str:
    response = http.post("/v1/episodes", json=body)
    assert response.status_code == 201, response.text
    episode_id: str = response.json()["id"]
    return episode_id


def act(http: httpx.Client, episode_id: str, **action: Any) -> dict[str, Any]:
    response = http.post(f"/v1/episodes/{episode_id}/actions", json=action)
    assert response.status_code == 200, response.text
    observation: dict[str, Any] = response.json()["observation"]
    return observation


def finish(http: httpx.Client, episode_id: str) -> dict[str, Any]:
    response = http.post(f"/v1/episodes/{episode_id}/finish")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"not within {timeout_s:.0f}s: {what}")


def readyz(stack: Stack) -> tuple[int, dict[str, Any]]:
    try:
        response = httpx.get(f"{stack.url}/readyz", timeout=10)
    except httpx.TransportError as exc:
        return 0, {"error": str(exc)}
    return response.status_code, response.json()


def wait_ready(stack: Stack, timeout_s: float = 60) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        status, body = readyz(stack)
        return body if status == 200 else None

    body: dict[str, Any] = wait_for(ready, timeout_s, f"{stack.url}/readyz green")
    return body


def service_containers(engine: docker.DockerClient, stack: Stack, service: str) -> list[Container]:
    return list(
        engine.containers.list(
            all=True,
            filters={
                "label": [
                    f"com.docker.compose.project={stack.project}",
                    f"com.docker.compose.service={service}",
                ]
            },
        )
    )


def redis_get(engine: docker.DockerClient, stack: Stack, key: str, field: str) -> str:
    """A field of an episode record, read in the stack's Redis (it is not published)."""
    (redis,) = service_containers(engine, stack, "redis")
    password = stack.env["PROCTOR_REDIS_PASSWORD"]
    code, output = redis.exec_run(
        ["redis-cli", "--no-auth-warning", "-a", password, "HGET", key, field]
    )
    assert code == 0, output
    return str(output.decode().strip())


def start_worker_host(
    engine: docker.DockerClient, stack: Stack, name: str, *, socket: bool = True, **env: str
) -> Container:
    """The worker image run the way docs/deployment.md runs it on another sandbox host
    (called `name`: host ids are `<name>-<start time>`), here on the stack's network,
    standing in for the route to the shared Redis."""
    environment = {
        "PROCTOR_REDIS_URL": stack.redis_url,
        "PROCTOR_HONEYPOT_NETWORK": stack.sandbox_network,
        **{k: v for k, v in STACK_SETTINGS.items() if k != "PROCTOR_WORKERS"},
        **env,
    }
    path = "/var/run/docker.sock"
    command = ["sh", "-c", 'export PROCTOR_HOST_ID="$(hostname)-$(date +%s)"; exec proctor worker']
    container = engine.containers.create(
        "proctor/service:latest",
        command,
        name=name,
        hostname=name,
        detach=True,
        environment=environment,
        network=stack.network,
        volumes={path: {"bind": path, "mode": "rw"}} if socket else {},
        group_add=[str(os.stat(path).st_gid)],
        init=True,
        read_only=True,
        tmpfs={"/tmp": ""},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        labels={"org.proctor.test": stack.project},
    )
    container.start()
    return container


def host_name(worker: str) -> str:
    """`<project>-noimage-<start time>.<pid>.<nonce>` → `noimage`."""
    host = worker.split(".")[0].rsplit("-", 1)[0]
    return host.rsplit("-", 1)[-1]


def live_workers(engine: docker.DockerClient, stack: Stack) -> list[str]:
    (redis,) = service_containers(engine, stack, "redis")
    since = time.time() - float(STACK_SETTINGS["PROCTOR_HEARTBEAT_TTL_S"])
    code, output = redis.exec_run(
        [
            "redis-cli",
            "--no-auth-warning",
            "-a",
            stack.env["PROCTOR_REDIS_PASSWORD"],
            "ZRANGEBYSCORE",
            "proctor:workers",
            str(since),
            "+inf",
        ]
    )
    assert code == 0, output
    return [str(name) for name in output.decode().split()]


def crash(container: Container) -> None:
    """SIGKILL the container's first process from the host, as a crash would: unlike
    `docker kill`, which counts as a manual stop, this leaves the restart policy to act."""
    container.reload()
    os.kill(int(container.attrs["State"]["Pid"]), signal.SIGKILL)


def remove(container: Container) -> None:
    try:
        container.stop(timeout=20)  # SIGTERM: the worker closes its warm pool itself
    finally:
        container.remove(force=True)


# ------------------------------------------------------------------ the tests, in order


def test_make_up_serves_one_shot_episodes(stack: Stack, http: httpx.Client) -> None:
    sys.stderr.write(f"\nmake up took {stack.up_s:.1f}s\n")
    body = wait_ready(stack, 10)
    assert body["checks"]["workers"] >= 2  # two worker containers, one process each

    right = run(http, episode("def add(a, b):\n    return a + b\n"))
    wrong = run(http, episode("def add(a, b):\n    return a - b\n"))
    assert (right["verdict"], right["reward"]) == ("passed", 1.0), right
    assert (wrong["verdict"], wrong["reward"]) == ("failed", 0.0), wrong
    assert right["sandbox"]["image_digest"].startswith("sha256:")
    # sandboxes are the engine's, on the stack's own internal network beside its honeypot
    assert right["sandbox"]["network"] in (stack.sandbox_network, "none")


def test_sandboxfusion_clients_reach_the_second_port(stack: Stack) -> None:
    """SkyRL's coder1 posts to the host's 8080: the stack publishes the API there too."""
    wait_ready(stack, 60)
    url = f"http://127.0.0.1:{stack.env['PROCTOR_SANDBOXFUSION_PORT']}/run_code"
    code = "import numpy\nprint(numpy.__version__.split('.')[0])\n"
    body = {"language": "python", "code": code, "stdin": None, "run_timeout": 10}
    answer = httpx.post(url, json=body, timeout=60).json()
    assert (answer["status"], answer["run_result"]["stdout"]) == ("Success", "1\n"), answer


def test_interactive_episode_earns_its_reward(
    stack: Stack, http: httpx.Client, repo: dict[str, str]
) -> None:
    fixed = start(http, interactive(repo))
    assert act(http, fixed, type="bash", command="cat calc.py")["output"] == BUGGY
    act(http, fixed, type="write_file", path="calc.py", content=FIXED)
    result = finish(http, fixed)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result

    untouched = start(http, interactive(repo))
    act(http, untouched, type="bash", command="ls")
    result = finish(http, untouched)
    assert (result["verdict"], result["reward"]) == ("failed", 0.0), result


def test_a_second_worker_host_keeps_its_interactive_episodes(
    stack: Stack, http: httpx.Client, repo: dict[str, str], engine: docker.DockerClient
) -> None:
    host_b = f"{stack.project}-host-b"
    other = start_worker_host(engine, stack, host_b)
    try:
        wait_for(
            lambda: (
                readyz(stack)[1].get("checks", {}).get("workers", 0) >= 3
                and not readyz(stack)[1]["checks"].get("worker_problems")
            ),
            60,
            "the second host's worker live and without problems",
        )
        # Idle workers take new jobs in turn: a few starts at once reach every host.
        episodes: dict[str, str] = {}
        with ThreadPoolExecutor(max_workers=3) as pool:
            for _ in range(4):
                for episode_id in pool.map(lambda _: start(http, interactive(repo)), range(3)):
                    key = f"proctor:episode:{episode_id}"
                    episodes[episode_id] = redis_get(engine, stack, key, "host")
                on_b = [h for h in episodes.values() if h.startswith(f"{host_b}-")]
                if on_b and len(set(episodes.values())) >= 2:
                    break
        hosts = set(episodes.values())
        assert any(h.startswith(f"{host_b}-") for h in hosts) and len(hosts) >= 2, episodes

        # interleaved actions: each must reach the host that holds its container
        for round_ in range(2):
            for episode_id in episodes:
                out = act(http, episode_id, type="bash", command=f"echo round {round_}; pwd")
                assert out["output"] == f"round {round_}\n/workspace\n", out
        for episode_id, host in episodes.items():
            act(http, episode_id, type="write_file", path="calc.py", content=FIXED)
            result = finish(http, episode_id)
            assert (result["verdict"], result["reward"]) == ("passed", 1.0), result
            assert result["sandbox"]["host"] == host
    finally:
        remove(other)
    wait_ready(stack)


def test_workers_that_cannot_run_sandboxes_say_why_in_readyz(
    stack: Stack, engine: docker.DockerClient
) -> None:
    no_socket = start_worker_host(engine, stack, f"{stack.project}-nosocket", socket=False)
    no_image = start_worker_host(
        engine,
        stack,
        f"{stack.project}-noimage",
        PROCTOR_IMAGES="python=proctor/missing-image:latest",
    )
    try:
        started = time.monotonic()

        def both_reported() -> dict[str, str] | None:
            problems: dict[str, str] = readyz(stack)[1].get("checks", {}).get("worker_problems", {})
            hosts = {host_name(worker) for worker in problems}
            return problems if {"nosocket", "noimage"} <= hosts else None

        problems = wait_for(both_reported, 20, "both problems in /readyz")
        sys.stderr.write(f"\nproblems in /readyz after {time.monotonic() - started:.1f}s\n")
        by_host = {host_name(worker): text for worker, text in problems.items()}
        assert "Docker engine" in by_host["nosocket"], by_host
        assert "proctor/missing-image:latest" in by_host["noimage"], by_host
        assert "image not found" in by_host["noimage"], by_host
        # the rest of the stack still serves: readiness counts the healthy workers
        assert readyz(stack)[0] == 200
        assert "cannot run sandboxes" in no_socket.logs().decode()
        assert "missing-image" in no_image.logs().decode()
    finally:
        for container in (no_socket, no_image):
            container.remove(force=True)


def test_redis_down_is_reported_at_once_and_a_crash_loses_nothing(
    stack: Stack, http: httpx.Client, engine: docker.DockerClient
) -> None:
    before = run(http, episode("def add(a, b):\n    return b + a\n"))
    assert before["reward"] == 1.0
    (redis,) = service_containers(engine, stack, "redis")

    redis.stop(timeout=10)
    try:
        started = time.monotonic()
        status, body = readyz(stack)
        assert status == 503, body
        assert time.monotonic() - started < 5
        assert body["checks"]["redis"].startswith("unreachable"), body
    finally:
        redis.start()
    wait_ready(stack)

    # a crash: no RDB snapshot on the way down, so what comes back is the append-only file
    time.sleep(1.5)  # appendfsync everysec
    crash(redis)
    wait_for(
        lambda: engine.containers.get(redis.id).status == "running",
        30,
        "Redis restarted by its restart policy",
    )
    wait_ready(stack)
    again = http.get(f"/v1/episodes/{before['id']}")
    assert again.status_code == 200 and again.json()["reward"] == 1.0, again.text
    after = run(http, episode("def add(a, b):\n    return a + b + 0\n"))
    assert after["reward"] == 1.0, after


def test_a_killed_worker_container_is_replaced_and_its_episode_ended(
    stack: Stack, http: httpx.Client, engine: docker.DockerClient
) -> None:
    created = http.post("/v1/episodes", json=episode("x = 1\n", tests=SLOW_TEST, timeout_s=60))
    episode_id = created.json()["id"]
    key = f"proctor:episode:{episode_id}"
    wait_for(
        lambda: http.get(f"/v1/episodes/{episode_id}").json()["status"] == "running",
        60,
        "the slow episode running",
    )
    host = redis_get(engine, stack, key, "host")
    owner = redis_get(engine, stack, key, "worker")
    hostname = host.rsplit("-", 1)[0]  # the stack's worker hosts are <hostname>-<start time>
    (victim,) = [
        c
        for c in service_containers(engine, stack, "worker")
        if c.attrs["Config"]["Hostname"] == hostname
    ]

    crash(victim)
    ended = wait_for(
        lambda: (r := http.get(f"/v1/episodes/{episode_id}").json())["status"] == "failed" and r,
        40,
        "the killed worker's episode ended",
    )
    assert ended["verdict"] == "infra_error" and ended["reward"] is None, ended
    # one listing call: `containers.list` inspects each container it lists, and one the
    # janitor removes in between (the sandbox, its network holder) raises NotFound
    wait_for(
        lambda: (
            not engine.api.containers(all=True, filters={"label": f"org.proctor.worker={owner}"})
        ),
        30,
        "the killed worker's sandbox removed",
    )
    wait_for(
        lambda: engine.containers.get(victim.id).status == "running",
        30,
        "the worker container restarted by its restart policy",
    )
    wait_for(
        lambda: any(
            w.startswith(f"{hostname}-") and not w.startswith(f"{host}.")
            for w in live_workers(engine, stack)
        ),
        60,
        "a new worker process live in the restarted container, a new host",
    )

    # the stack serves again: two episodes at once both pass
    wait_ready(stack)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(
                lambda i: run(http, episode(f"def add(a, b):\n    return a + b + {i} * 0\n")),
                [1, 2],
            )
        )
    assert [r["reward"] for r in results] == [1.0, 1.0], results


def test_make_down_leaves_only_the_data_volume(stack: Stack, engine: docker.DockerClient) -> None:
    down = make("down", stack.env, 120)
    assert down.returncode == 0
    label = f"com.docker.compose.project={stack.project}"
    assert engine.containers.list(all=True, filters={"label": label}) == []
    assert (
        engine.containers.list(
            all=True, filters={"label": f"org.proctor.deployment={stack.deployment}"}
        )
        == []
    )
    assert (
        engine.containers.list(all=True, filters={"label": f"org.proctor.test={stack.project}"})
        == []
    )
    honeypots = engine.containers.list(
        all=True, filters={"name": f"proctor-honeypot-{stack.deployment}"}
    )
    assert honeypots == []
    networks = {n.name for n in engine.networks.list()}
    assert stack.network not in networks and stack.sandbox_network not in networks
    volumes = [v.name for v in engine.volumes.list(filters={"label": label})]
    assert volumes == [f"{stack.project}_redis-data"]
