"""A runner program sent to a sandbox that has stopped meanwhile (its init taken by the OOM
killer of a memory cgroup the code under test filled): the engine refuses the exec, and why
the sandbox stopped decides the verdict, as for a runner that dies while it runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from proctor.models import Verdict
from workers.sandbox.engine import Container, Engine, SandboxError, SandboxSpec
from workers.sandbox.protocol import Listing
from workers.sandbox.sandbox import RunnerBroken, Sandbox

pytestmark = pytest.mark.usefixtures("docker_ready")


@pytest.fixture
def engine() -> Iterator[Engine]:
    found = Engine(worker="stopped-test", host="test", deployment=f"test-{uuid.uuid4().hex[:8]}")
    yield found
    found.release_networks()


@pytest.fixture
def container(engine: Engine) -> Iterator[Container]:
    spec = SandboxSpec(image="proctor/sandbox-python:latest", memory_mb=64)
    made = engine.create(spec, name=f"proctor-stopped-{uuid.uuid4().hex[:8]}")
    yield made
    engine.remove(made.id)


def test_a_sandbox_whose_init_was_killed_is_the_code_under_tests_verdict(
    engine: Engine, container: Container
) -> None:
    engine.api.kill(container.id, signal="SIGKILL")  # as the OOM killer ends it
    engine.api.wait(container.id, timeout=30)
    with pytest.raises(RunnerBroken) as broken:
        Sandbox(engine, container, episode_id="ep").program([Listing()], timeout_s=10)
    assert broken.value.failure.verdict is Verdict.oom


def test_a_sandbox_the_engine_stopped_is_ours(engine: Engine, container: Container) -> None:
    engine.api.kill(container.id, signal="SIGTERM")  # not what the code under test can do
    engine.api.wait(container.id, timeout=30)
    with pytest.raises(SandboxError, match="stopped"):
        Sandbox(engine, container, episode_id="ep").program([Listing()], timeout_s=10)
