"""Task images by reference against a real registry (Debian's docker-registry, started here)
and the real engine: a cold pull then a warm use, many workers asking at once → one pull,
the least recently used removed under a tiny budget (never the deployment's, never one a
container uses), an image the registry has not, and a registry that stalls."""

from __future__ import annotations

import base64
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import docker
import pytest
import redis

from core.task_images import missing_reason
from tests.registry import (
    BASE,
    PASSWORD,
    USER,
    Registry,
    StallingProxy,
    push,
    running_registry,
    small_image,
)
from workers.sandbox.docker import (
    DEPLOYMENT_LABEL,
    Engine,
    ImageNotInRegistry,
    PullFailed,
    SandboxSpec,
)
from workers.sandbox.images import TaskImages

pytestmark = pytest.mark.usefixtures("docker_ready")

TINY_GB = 1e-9  # a byte: every pulled image is over it


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with tempfile.TemporaryDirectory() as tmp, running_registry(Path(tmp)) as running:
        yield running


@pytest.fixture
def client() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture
def pushed(registry: Registry, client: docker.DockerClient) -> Iterator[list[str]]:
    """Three references pushed to the registry (none of them on the engine), removed after."""
    refs = []
    for n in range(3):
        local = small_image(client, f"task-{n}-{uuid.uuid4().hex}")
        ref = registry.ref(f"tasks/t{n}", uuid.uuid4().hex[:8])
        try:
            push(client, local, ref)
        finally:
            client.images.remove(local, force=True)
        refs.append(ref)
    yield refs
    for ref in refs:
        with suppress(docker.errors.ImageNotFound):
            client.images.remove(ref, force=True)


@pytest.fixture
def engine() -> Iterator[Engine]:
    deployment = f"test-{uuid.uuid4().hex[:8]}"
    engine = Engine(worker="images-test", host="test", deployment=deployment, holder_image=BASE)
    yield engine
    engine.release_networks()
    client = docker.from_env()
    for c in client.containers.list(
        all=True, filters={"label": f"{DEPLOYMENT_LABEL}={deployment}"}
    ):
        c.remove(force=True)
    client.close()


def cache(
    engine: Engine, client: redis.Redis, host: str, *, timeout_s: float = 120, gb: float = 50
) -> TaskImages:
    return TaskImages(
        engine, client, host=host, keep=[BASE], timeout_s=timeout_s, budget_gb=gb, grace_s=0
    )


def present(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_a_cold_pull_then_warm_uses_and_the_digest_is_the_registrys(
    engine: Engine, redis_client: redis.Redis, pushed: list[str], client: docker.DockerClient
) -> None:
    host = f"h-{uuid.uuid4().hex[:8]}"
    images = cache(engine, redis_client, host)
    ref = pushed[0]
    assert images.ensure(ref) is True  # cold: pulled
    assert images.ensure(ref) is False  # warm: already here
    assert images.pulls(ref) == 1
    pushed_digest = client.images.get_registry_data(ref).id
    assert engine.image_digest(ref) == pushed_digest


def test_many_workers_asking_at_once_make_one_pull(
    engine: Engine, redis_url: str, pushed: list[str]
) -> None:
    host = f"h-{uuid.uuid4().hex[:8]}"
    ref = pushed[1]
    outcomes: list[bool | BaseException] = []
    start = threading.Barrier(6)

    def worker() -> None:
        # a worker process of its own: its own engine client and Redis connection
        own = Engine(
            worker=f"w-{uuid.uuid4().hex[:6]}",
            host=host,
            deployment=engine.deployment,
            holder_image=BASE,
        )
        with redis.Redis.from_url(redis_url) as client:
            images = cache(own, client, host)
            start.wait()
            try:
                outcomes.append(images.ensure(ref))
            except BaseException as exc:
                outcomes.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert sorted(map(repr, outcomes)) == sorted(["True"] + ["False"] * 5), outcomes
    with redis.Redis.from_url(redis_url) as client:
        assert cache(engine, client, host).pulls(ref) == 1


def test_the_least_recently_used_go_first_never_ours_never_one_in_use(
    engine: Engine,
    redis_client: redis.Redis,
    pushed: list[str],
    client: docker.DockerClient,
) -> None:
    host = f"h-{uuid.uuid4().hex[:8]}"
    images = cache(engine, redis_client, host, gb=TINY_GB)
    first, second, third = pushed
    images.touch(BASE)  # the deployment's own image in the line too: never removed
    images.ensure(first)
    container = engine.create(SandboxSpec(image=first), name=f"inuse-{uuid.uuid4().hex[:10]}")
    try:
        images.ensure(second)  # over budget: `first` is oldest but a container uses it
        assert present(client, first) and present(client, second)
        engine.remove(container.id)
        images.ensure(third)  # now `first`, then `second` go; the one just pulled stays
        assert not present(client, first)
        assert not present(client, second)
        assert present(client, third)
        assert present(client, BASE)
    finally:
        engine.remove(container.id)
    images.ensure(first)  # gone from the host: pulled again
    assert images.pulls(first) == 2


def test_an_image_the_registry_has_not_is_the_tasks_fault_and_remembered(
    engine: Engine, redis_client: redis.Redis, registry: Registry
) -> None:
    host = f"h-{uuid.uuid4().hex[:8]}"
    images = cache(engine, redis_client, host)
    ref = registry.ref("tasks/never-pushed", uuid.uuid4().hex[:8])
    with pytest.raises(ImageNotInRegistry, match="manifest unknown"):
        images.ensure(ref)
    assert missing_reason(redis_client, ref) is not None
    with pytest.raises(ImageNotInRegistry):  # known now: no second pull is tried
        cache(engine, redis_client, f"{host}-other").ensure(ref)
    assert images.pulls(ref) == 0


def test_a_registry_that_does_not_answer_is_ours_and_bounded(
    engine: Engine, redis_client: redis.Redis, registry: Registry, pushed: list[str]
) -> None:
    proxy = StallingProxy(registry.host)
    try:
        proxy.stall.set()
        ref = pushed[2].replace(registry.host, proxy.host)
        host = f"h-{uuid.uuid4().hex[:8]}"
        waited: list[BaseException] = []

        def other_worker() -> None:  # waits for the stalled puller's lock, bounded too
            time.sleep(0.5)
            try:
                cache(engine, redis_client, host, timeout_s=2).ensure(ref)
            except PullFailed as exc:
                waited.append(exc)

        thread = threading.Thread(target=other_worker)
        thread.start()
        started = time.monotonic()
        with pytest.raises(PullFailed, match="no answer within"):
            cache(engine, redis_client, host, timeout_s=2).ensure(ref)
        thread.join(60)
        # generous: a bound at all is what is checked, not its precision on a busy host
        assert time.monotonic() - started < 30
        assert len(waited) == 1
        assert missing_reason(redis_client, ref) is None  # not the task's fault
        proxy.stall.clear()
        assert cache(engine, redis_client, host, timeout_s=60).ensure(ref) is True
    finally:
        proxy.close()
        with suppress(docker.errors.ImageNotFound):
            docker.from_env().images.remove(pushed[2].replace(registry.host, proxy.host))


def test_registry_credentials_come_from_the_engine_clients_config(
    redis_client: redis.Redis,
    client: docker.DockerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry that asks for credentials: without them in the client's config
    (DOCKER_CONFIG, as `docker login` writes it) the pull is our failure, not the task's;
    with them it pulls."""
    with running_registry(tmp_path, auth=True) as private:
        local = small_image(client, uuid.uuid4().hex)
        ref = private.ref("private/task", uuid.uuid4().hex[:8])
        try:
            push(client, local, ref, auth={"username": USER, "password": PASSWORD})
        finally:
            client.images.remove(local, force=True)
        host = f"h-{uuid.uuid4().hex[:8]}"
        try:
            monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-credentials"))
            anonymous = Engine(worker="anon", host=host, deployment="test-auth", holder_image=BASE)
            with pytest.raises(PullFailed, match="no basic auth credentials"):
                cache(anonymous, redis_client, host).ensure(ref)
            assert missing_reason(redis_client, ref) is None
            config = tmp_path / "docker-config"
            config.mkdir()
            login = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            (config / "config.json").write_text(
                json.dumps({"auths": {private.host: {"auth": login}}})
            )
            monkeypatch.setenv("DOCKER_CONFIG", str(config))
            engine = Engine(worker="authed", host=host, deployment="test-auth", holder_image=BASE)
            assert cache(engine, redis_client, host).ensure(ref) is True
        finally:
            with suppress(docker.errors.ImageNotFound):
                client.images.remove(ref, force=True)
