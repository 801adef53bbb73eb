"""The OOM killer's count of a sandbox, read from the host's side of its memory cgroup
(`Engine.oom_kills`): what a pooled sandbox's lost server is classified by when an exec
into its full cgroup cannot start."""

from __future__ import annotations

import uuid

import pytest

from workers.sandbox.engine import Engine, SandboxSpec

pytestmark = pytest.mark.usefixtures("docker_ready")


def test_the_host_reads_a_sandboxs_oom_kills() -> None:
    engine = Engine(worker="oom-test", host="test", deployment=f"test-{uuid.uuid4().hex[:8]}")
    spec = SandboxSpec(image="proctor/sandbox-python:latest", memory_mb=64)
    container = engine.create(spec, name=f"proctor-oom-{uuid.uuid4().hex[:8]}")
    try:
        if engine.oom_kills(container.id) is None:
            pytest.skip("this host's memory cgroups are not where the engine puts them")
        assert engine.oom_kills(container.id) == 0
        bomb = engine.exec(container.id, ["python3", "-c", "b = bytearray(512 << 20)"])
        assert bomb.exit_code == 137  # SIGKILL: the OOM killer's
        assert (engine.oom_kills(container.id) or 0) >= 1
        assert engine.oom_kills("0" * 64) is None  # no such container: nothing to read
    finally:
        engine.remove(container.id)
        engine.release_networks()  # the network holder it kept for a next sandbox
