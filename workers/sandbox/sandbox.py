"""One sandbox: a container plus the in-sandbox runner that does the work inside it."""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from workers.sandbox.docker import Container, Engine, SandboxError

log = logging.getLogger(__name__)

# The runner's source comes through stdin ahead of its request (length-prefixed), so a
# process listing inside or outside the sandbox shows a short command, not the source.
BOOT = (
    "import sys;n=int(sys.stdin.buffer.readline());"
    "exec(compile(sys.stdin.buffer.read(n),'proctor-runner','exec'))"
)

# Beyond the run timeouts inside a program, how long the runner may take to answer.
RUNNER_GRACE_S = 15.0
RUNNER_MAX_REPLY = 64 << 20


@cache
def runner_source() -> bytes:
    return (Path(__file__).with_name("runner.py")).read_bytes()


class RunnerBroken(Exception):
    """The runner gave no valid reply while the sandbox itself was fine.

    The runner shares its uid with the code under test, which can kill it; that is the
    code under test failing, not our infrastructure.
    """


@dataclass(slots=True)
class Reply:
    results: list[dict[str, Any]]
    error: str | None


class Sandbox:
    def __init__(self, engine: Engine, container: Container, *, episode_id: str) -> None:
        self.engine = engine
        self.container = container
        self.episode_id = episode_id

    @property
    def user(self) -> str:
        return self.container.spec.user

    def program(self, ops: list[dict[str, Any]], *, timeout_s: float) -> Reply:
        """Run a list of runner operations in one exec."""
        nonce = secrets.token_hex(16)
        source = runner_source()
        payload = b"%d\n" % len(source) + source + json.dumps({"nonce": nonce, "ops": ops}).encode()
        result = self.engine.exec(
            self.container.id,
            ["python3", "-I", "-S", "-c", BOOT],
            stdin=payload,
            user=self.user,
            timeout_s=timeout_s + RUNNER_GRACE_S,
            max_output=RUNNER_MAX_REPLY,
        )
        if result.timed_out:
            self.kill_all()
            raise RunnerBroken("the sandbox runner did not answer in time")
        if result.exit_code in (126, 127) and not result.stdout:
            raise SandboxError(
                f"the image {self.container.spec.image} cannot run python3: "
                + result.stderr.decode(errors="replace")[-500:]
            )
        try:
            reply = json.loads(result.stdout)
            if reply.get("nonce") != nonce:
                raise ValueError("nonce mismatch")
        except ValueError as exc:
            log.warning(
                "episode %s container %s: runner reply unusable (%s); stderr=%r",
                self.episode_id, self.container.name, exc, result.stderr[-300:],
            )
            raise RunnerBroken(f"the sandbox runner's reply was unusable ({exc})") from exc
        return Reply(results=list(reply["results"]), error=reply.get("error"))

    def kill_all(self) -> None:
        """SIGKILL every process of the sandbox user, whatever session it escaped to."""
        self.engine.exec(
            self.container.id, ["kill", "-9", "-1"], user=self.user, timeout_s=10
        )

    def oom_killed(self) -> bool:
        return self.engine.oom_killed(self.container.id)
