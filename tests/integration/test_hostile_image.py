"""An image is data, never trusted code: a task image by reference whose configuration is
hostile — an entrypoint that would run first, USER root, loader hooks in its ENV, a VOLUME
anyone may write, a setuid-root binary, a health check, labels that pass for ours — built
here, pushed to a real registry, pulled by reference, and run as a sandbox like any other.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import docker
import pytest

from tests.registry import BASE, Registry, build, push, running_registry
from workers.sandbox.docker import (
    DEPLOYMENT_LABEL,
    HOLDER_LABEL,
    MANAGED_LABEL,
    POOL_LABEL,
    Engine,
    SandboxSpec,
)
from workers.sandbox.pooled import RunnerPool
from workers.sandbox.protocol import Run, RunResult, Write
from workers.sandbox.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("docker_ready")

HOSTILE = f"""\
FROM {BASE}
USER 0:0
RUN cp /usr/bin/id /usr/local/bin/suid-id && chmod 4755 /usr/local/bin/suid-id \\
    && mkdir -p /data && chmod 1777 /data && echo baked > /data/baked
VOLUME /data
ENV LD_PRELOAD=/nonexistent/hook.so PYTHONPATH=/evil BASH_ENV=/evil/bashrc KEEP_ME=1
LABEL {MANAGED_LABEL}=1 {POOL_LABEL}=hostile {HOLDER_LABEL}=1 {DEPLOYMENT_LABEL}=someone-else
HEALTHCHECK --interval=1s CMD touch /tmp/health-ran
ENTRYPOINT ["/bin/sh", "-c", "touch /tmp/entrypoint-ran; exec \\"$@\\"", "--"]
CMD ["sleep", "infinity"]
"""

PROBE = r"""
import json, os, subprocess
def writable(path):
    try:
        with open(os.path.join(path, "probe"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
suid = subprocess.run(["/usr/local/bin/suid-id", "-u"], capture_output=True, text=True)
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(),
    "suid_euid": suid.stdout.strip(),
    "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "PYTHONPATH", "BASH_ENV", "KEEP_ME")},
    "entrypoint_ran": os.path.exists("/tmp/entrypoint-ran"),
    "data_writable": writable("/data"),
    "data_listing": sorted(os.listdir("/data")) if os.path.isdir("/data") else None,
    "root_writable": writable("/"),
}))
"""


@pytest.fixture(scope="module")
def hostile_ref() -> Iterator[str]:
    client = docker.from_env()
    with tempfile.TemporaryDirectory() as tmp, running_registry(Path(tmp)) as registry:
        local = build(client, HOSTILE, {})
        ref = Registry(registry.host).ref("hostile/image", uuid.uuid4().hex[:8])
        try:
            push(client, local, ref)
        finally:
            client.images.remove(local, force=True)
        yield ref
        with_suppressed_remove(client, ref)
    client.close()


def with_suppressed_remove(client: docker.DockerClient, ref: str) -> None:
    with suppress(docker.errors.ImageNotFound):
        client.images.remove(ref, force=True)


@pytest.fixture
def engine() -> Iterator[Engine]:
    deployment = f"test-{uuid.uuid4().hex[:8]}"
    engine = Engine(worker="hostile-test", host="test", deployment=deployment, holder_image=BASE)
    yield engine
    engine.release_networks()
    client = docker.from_env()
    for c in client.containers.list(
        all=True, filters={"label": f"{DEPLOYMENT_LABEL}={deployment}"}
    ):
        c.remove(force=True)
    client.close()


def probe(sandbox: Sandbox) -> dict[str, object]:
    run = Run(command="python3 probe.py", timeout_s=60, output_bytes=1 << 16)
    reply = sandbox.program([Write(files={"probe.py": PROBE}), run], timeout_s=70)
    result = reply.result(run)
    assert isinstance(result, RunResult), reply.error
    assert result.exit_code == 0, result.stderr
    seen: dict[str, object] = json.loads(result.stdout)
    return seen


def assert_contained(seen: dict[str, object]) -> None:
    assert seen["uid"] != 0 and seen["euid"] != 0
    assert seen["suid_euid"] == str(seen["uid"]), "a setuid-root binary raised its euid"
    assert seen["env"] == {"LD_PRELOAD": "", "PYTHONPATH": "", "BASH_ENV": "", "KEEP_ME": "1"}
    assert seen["entrypoint_ran"] is False
    assert seen["data_writable"] is False and seen["data_listing"] == []
    assert seen["root_writable"] is False


def test_a_hostile_image_by_reference_runs_contained(engine: Engine, hostile_ref: str) -> None:
    engine.pull(hostile_ref, timeout_s=120)
    spec = SandboxSpec(image=hostile_ref)
    container = engine.create(spec, name=f"hostile-{uuid.uuid4().hex[:12]}")
    try:
        info = engine.inspect(container.id)
        labels = info["Config"]["Labels"]
        assert labels[DEPLOYMENT_LABEL] == engine.deployment
        assert labels[POOL_LABEL] == "" and labels[HOLDER_LABEL] == ""
        assert info["Config"]["Healthcheck"]["Test"] == ["NONE"]
        assert info["Config"]["Entrypoint"] == ["sleep"]
        assert not [m for m in info["Mounts"] if m.get("Type") == "volume"], info["Mounts"]
        assert info["HostConfig"]["ReadonlyRootfs"] is True
        assert info["HostConfig"]["CapDrop"] == ["ALL"]
        # the network holder it joined (which outlives it, for sandboxes of other images)
        # is of the deployment's own image, never the task's
        holder = engine.network_owner(container.id)
        assert holder["Id"] != container.id
        assert holder["Config"]["Image"] == BASE
        assert_contained(probe(Sandbox(engine, container, episode_id=uuid.uuid4().hex)))
    finally:
        engine.remove(container.id)


def test_a_hostile_image_serves_pooled_episodes_contained(engine: Engine, hostile_ref: str) -> None:
    engine.pull(hostile_ref, timeout_s=120)
    pool = RunnerPool(engine, episodes=2, size=0)
    try:
        spec = replace(SandboxSpec(image=hostile_ref), pooled=True)
        sandbox, _ = pool.acquire(spec, episode_id=uuid.uuid4().hex)
        try:
            assert_contained(probe(sandbox))
        finally:
            pool.release(sandbox)
    finally:
        pool.close()
