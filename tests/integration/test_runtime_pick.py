"""A deployment that names no OCI runtime gets crun where the engine has it and it runs
sandboxes with every protection, and the engine's default where it does not."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from workers.sandbox import checks
from workers.sandbox.checks import FAST_RUNTIME, pick_runtime
from workers.sandbox.engine import (
    DEPLOYMENT_LABEL,
    Container,
    DockerUnavailable,
    Engine,
    SandboxSpec,
)

pytestmark = pytest.mark.usefixtures("docker_ready")

SPEC = SandboxSpec(image="proctor/sandbox-python:latest", memory_mb=256, pids=64)


@pytest.fixture
def engine() -> Iterator[Engine]:
    deployment = f"test-{uuid.uuid4().hex[:8]}"
    engine = Engine(worker="pick-test", host="test", deployment=deployment)
    yield engine
    engine.release_networks()
    client = docker.from_env()
    for c in client.containers.list(
        all=True, filters={"label": f"{DEPLOYMENT_LABEL}={deployment}"}
    ):
        c.remove(force=True)
    client.close()


def test_crun_is_picked_where_the_engine_has_it_and_it_runs(engine: Engine) -> None:
    if FAST_RUNTIME not in engine.runtimes():
        pytest.skip("crun is not registered with this engine (scripts/setup.sh does it)")
    assert pick_runtime(engine, SPEC) == FAST_RUNTIME
    container = engine.create(
        SandboxSpec(image=SPEC.image, runtime=FAST_RUNTIME), name=f"pick-{uuid.uuid4().hex[:8]}"
    )
    try:
        assert engine.inspect(container.id)["HostConfig"]["Runtime"] == FAST_RUNTIME
    finally:
        engine.remove(container.id)


def test_a_runtime_that_cannot_start_sandboxes_leaves_the_engines_default(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine lists it, but every sandbox it would start fails: the engine's own
    default is checked and used instead, and the log says why."""
    broken = f"proctor-missing-{uuid.uuid4().hex[:6]}"
    monkeypatch.setattr(checks, "FAST_RUNTIME", broken)
    monkeypatch.setattr(engine, "runtimes", lambda: {"runc", broken})
    assert pick_runtime(engine, SPEC) is None
    assert broken in caplog.text and "engine's default" in caplog.text


def test_an_engine_without_crun_gets_its_default_checked(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "runtimes", lambda: {"runc"})
    assert pick_runtime(engine, SPEC) is None


def test_an_engine_that_stops_answering_is_no_reason_to_give_up_crun(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hiccup of the engine is not crun's fault: it reaches the worker's retry loop
    instead of leaving that worker on runc for good."""

    create = engine.create

    def unanswered_under_crun(spec: SandboxSpec, **kwargs: Any) -> Container:
        if spec.runtime == FAST_RUNTIME:  # the moment the probe asks: a hiccup
            raise DockerUnavailable("the Docker engine does not answer")
        return create(spec, **kwargs)

    monkeypatch.setattr(engine, "runtimes", lambda: {"runc", FAST_RUNTIME})
    monkeypatch.setattr(engine, "create", unanswered_under_crun)
    with pytest.raises(DockerUnavailable):
        pick_runtime(engine, SPEC)
