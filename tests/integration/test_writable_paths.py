"""No place an episode can write outside what it owns and its clean-up empties: a walk of
the whole filesystem from inside each kind of sandbox (interactive, fresh one-shot,
pooled), as the episode's uid, under every OCI runtime the engine has of those a worker
may pick (runc, crun, runsc)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace

import docker
import pytest

from workers.sandbox.engine import DEPLOYMENT_LABEL, SANDBOX_HOME, WORKSPACE, Engine, SandboxSpec
from workers.sandbox.protocol import Run, RunResult, Write
from workers.sandbox.sandbox import Sandbox
from workers.sandbox.server_sandboxes import RunnerPool

pytestmark = pytest.mark.usefixtures("docker_ready")

IMAGE = "proctor/sandbox-python:latest"
RUNTIMES = ("runc", "crun", "runsc")
KINDS = ("interactive", "oneshot", "pooled")
WALK_S = 120.0
# what an episode owns, or shares and its clean-up empties (`pool_server.py`)
OWNED = (WORKSPACE, SANDBOX_HOME, "/tmp", "/mnt", "/dev/shm", "/dev/mqueue")
# devices that hold nothing written to them (major, minor): null, zero, full, random,
# urandom, tty, the pseudo-terminal multiplexer; gVisor's fuse and tun, of no use without
# the capabilities a sandbox never has
STATELESS_DEVICES = {(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2), (10, 229), (10, 200)}

# Lists every directory the walker can create an entry in (asked of the kernel, then
# tried) and every other file it may open for writing, with its kind and device number.
WALK = r"""
import json, os, stat, sys

def can_create_in(path):
    if not os.access(path, os.W_OK):
        return False
    probe = os.path.join(path, ".proctor-walk-%d" % os.getpid())
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
        return True
    except OSError:
        pass
    try:
        os.mkdir(probe)
        os.rmdir(probe)
        return True
    except OSError:
        return False

found, stack = [], ["/"]
while stack:
    directory = stack.pop()
    try:
        names = os.listdir(directory)
    except OSError:
        continue
    if can_create_in(directory):
        found.append({"path": directory, "kind": "dir"})
    for name in names:
        # a process's own entries are views of it (its fds, its memory), not places to keep
        if directory == "/proc" and (name.isdigit() or name in ("self", "thread-self")):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            stack.append(path)
        elif os.access(path, os.W_OK):
            kind = "chr" if stat.S_ISCHR(st.st_mode) else "blk" if stat.S_ISBLK(st.st_mode) else "file"
            device = [os.major(st.st_rdev), os.minor(st.st_rdev)]
            found.append({"path": path, "kind": kind, "device": device})
print(json.dumps({"uid": os.getuid(), "found": found}))
"""


def outside_owned(found: list[dict[str, object]]) -> list[dict[str, object]]:
    def owned(path: str) -> bool:
        return any(path == root or path.startswith(root + "/") for root in OWNED)

    def stateless(item: dict[str, object]) -> bool:
        device = item.get("device")
        return (
            item["kind"] == "chr"
            and isinstance(device, list)
            and tuple(device) in STATELESS_DEVICES
        )

    return [i for i in found if not (owned(str(i["path"])) or stateless(i))]


@pytest.fixture
def engine() -> Iterator[Engine]:
    deployment = f"test-{uuid.uuid4().hex[:8]}"
    engine = Engine(worker="walk-test", host="test", deployment=deployment)
    yield engine
    engine.release_networks()
    client = docker.from_env()
    for c in client.containers.list(
        all=True, filters={"label": f"{DEPLOYMENT_LABEL}={deployment}"}
    ):
        c.remove(force=True)
    client.close()


def walk_in(sandbox: Sandbox) -> dict[str, object]:
    walk = Run(command="python3 walk.py", timeout_s=WALK_S, output_bytes=1 << 20)
    reply = sandbox.program([Write(files={"walk.py": WALK}), walk], timeout_s=WALK_S + 10)
    result = reply.result(walk)
    assert isinstance(result, RunResult), reply.error
    assert result.exit_code == 0 and not result.stdout_truncated, result.stderr
    seen: dict[str, object] = json.loads(result.stdout)
    return seen


def interactive(engine: Engine, spec: SandboxSpec) -> dict[str, object]:
    container = engine.create(spec, name=f"walk-{uuid.uuid4().hex[:12]}")
    try:
        return walk_in(Sandbox(engine, container, episode_id=uuid.uuid4().hex))
    finally:
        engine.remove(container.id)


def served(
    episodes: int, *, server: bool = False, pooled: bool = False
) -> Callable[[Engine, SandboxSpec], dict[str, object]]:
    def walk(engine: Engine, spec: SandboxSpec) -> dict[str, object]:
        pool = RunnerPool(engine, episodes=episodes, size=0)
        try:
            sandbox, _ = pool.acquire(
                replace(spec, server=server, pooled=pooled), episode_id=uuid.uuid4().hex
            )
            try:
                return walk_in(sandbox)
            finally:
                pool.release(sandbox)
        finally:
            pool.close()

    return walk


WALKERS = {
    "interactive": interactive,
    "oneshot": served(1, server=True),  # a fresh container whose server serves one episode
    "pooled": served(50, pooled=True),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_episode_can_write_only_where_it_owns_or_the_clean_up_empties(
    engine: Engine, runtime: str, kind: str
) -> None:
    if runtime not in engine.runtimes():
        pytest.skip(f"{runtime} is not registered with this engine")
    spec = SandboxSpec(image=IMAGE, runtime=runtime)
    seen = WALKERS[kind](engine, spec)
    found = seen["found"]
    assert isinstance(found, list)
    assert seen["uid"] != 0
    # the walk saw the places it may write (else it proves nothing)
    assert {WORKSPACE, "/tmp", "/dev/shm"} <= {str(i["path"]) for i in found}
    assert outside_owned(found) == []
