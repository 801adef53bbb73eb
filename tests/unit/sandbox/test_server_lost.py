"""A pooled sandbox whose server is gone: the OOM killer's doing (a typed `oom`, reward 0)
whenever the engine shows the sandbox's memory exhausted — its init gone too, a kill on the
cgroup's count, or memory still within the server's share of the limit — and ours otherwise.
The server runs as root, out of the code under test's reach, so nothing else of the
episode's making can end it."""

from __future__ import annotations

from typing import Any

import pytest

from proctor.models import Verdict
from workers.sandbox.engine import POOLED_SERVER_MB, Container, SandboxError, SandboxSpec, Usage
from workers.sandbox.sandbox import RunnerBroken
from workers.sandbox.server_sandboxes import PooledRunner, PooledSandbox

LIMIT = 288 << 20


class Engine:
    """What `_server_lost` asks of the engine: its usage readings in turn, the host's OOM
    count, and an exec that cannot start (a full cgroup)."""

    def __init__(self, readings: list[Usage], kills: int | None = None) -> None:
        self.readings, self.kills = readings, kills

    def usage(self, container_id: str) -> Usage:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def oom_kills(self, container_id: str) -> int | None:
        return self.kills

    def exec(self, container_id: str, command: list[str], **_: Any) -> Any:
        raise SandboxError("exec: cannot start in a cgroup whose memory is full")


class Stream:
    stderr = bytearray()


def verdict_of(engine: Engine) -> Verdict:
    container = Container(id="c" * 64, name="proctor-pooled-test", spec=SandboxSpec(image="x"))
    runner = PooledRunner(container=container, stream=Stream())  # type: ignore[arg-type]
    sandbox = PooledSandbox(engine, runner, episode_id="ep_1")  # type: ignore[arg-type]
    error = sandbox._server_lost("the server's stream closed")
    if isinstance(error, RunnerBroken):
        return error.failure.verdict
    assert isinstance(error, SandboxError)
    return Verdict.infra_error


def running(memory: int, pids: int | None = 3) -> Usage:
    return Usage(running=True, oom_killed=False, pids=pids, memory=memory, memory_limit=LIMIT)


STOPPED_BY_OOM = Usage(running=False, oom_killed=False, exit_code=137)


@pytest.mark.parametrize(
    ("engine", "verdict"),
    [
        # the init went with the server: an emptied cgroup, then the sandbox seen stopped
        (Engine([running(400_000, pids=None), STOPPED_BY_OOM]), Verdict.oom),
        # the host's side of the cgroup counts the kill
        (Engine([running(100 << 20)], kills=1), Verdict.oom),
        # the dead server's memory freed, the rest still full (tmpfs pages)
        (Engine([running(LIMIT - (POOLED_SERVER_MB << 20) + 1)]), Verdict.oom),
        # memory to spare and no kill: the server failed, and that is ours
        (Engine([running(100 << 20)], kills=0), Verdict.infra_error),
    ],
    ids=["init-gone", "kill-counted", "memory-full", "ours"],
)
def test_a_lost_server_is_classified_by_the_sandboxs_memory(
    engine: Engine, verdict: Verdict
) -> None:
    assert verdict_of(engine) is verdict
