"""Pooled isolation: long-lived sandboxes, each serving one episode after another.

A pooled sandbox is a locked-down container like any other (no network unless the task's
policy gives it the honeypot's, read-only root, no new privileges, its own memory, cpu and
pids limits) whose root server (`assets/pool_server.py`) stays attached to this worker.
An episode is one line to the server and one line back: no container to create, start and
remove, and no `docker exec`; the files every episode writes (the grader's) are given to
the server once, when it starts. The server runs each episode as a fresh uid in its own
session, with its own 0700 workspace, home and temporary directory and its rlimits, kills
whatever it started at its end, removes its files and checks that nothing is left.

A sandbox serves one episode at a time — concurrent episodes are in different containers,
so they share no process table, files or memory cgroup — and is thrown away after
`episodes` episodes, after any anomaly the server reports (a process or a file that
survived cleaning, memory exhausted), or when its server stops answering.
"""

from __future__ import annotations

import json
import logging
import secrets
import select
import time
import uuid
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from workers.sandbox.demand import Budget
from workers.sandbox.docker import (
    FRAME_HEADER,
    POOL_LABEL,
    POOLED_SERVER_MB,
    Attached,
    Container,
    Engine,
    SandboxError,
    SandboxSpec,
    Usage,
    oom_kill_count,
)
from workers.sandbox.pool import StartedPool
from workers.sandbox.protocol import (
    EXIT_NO_MEMORY,
    SHARED_FILES,
    Program,
    Reply,
    Results,
    shared_base64,
)
from workers.sandbox.sandbox import (
    ASSETS,
    BOOT,
    RUNNER_GRACE_S,
    RUNNER_MAX_REPLY,
    SIGKILLED,
    Evidence,
    Sandbox,
    runner_input,
)

log = logging.getLogger(__name__)

SERVER_START_S = 20.0
# the cgroup's OOM kill count: cgroup v1's file, then v2's
OOM_COUNTS = "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events"
NOFILE = 1024
SERVER_COMMAND = ["python3", "-I", "-S", "-c", BOOT]  # the sandbox's main process
STOPPING_S = 5.0  # how long a sandbox with no process left may take to be seen stopped


class ServerGone(Exception):
    """The server's stream closed, broke or said nothing in time."""


class ReplyTooLarge(ServerGone):
    """The server's answer outgrew what a worker reads: the episode's data made it so."""


class ServerStream:
    """Lines from a pooled server's stdout, read out of Docker's stdout/stderr frames."""

    def __init__(self, attached: Attached) -> None:
        self.attached = attached
        self._buffer = bytearray()  # undecoded frames
        self._stdout = bytearray()  # stdout not yet returned as a line
        self.stderr = bytearray()  # the server's own complaints, for the log

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.attached.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise ServerGone(f"cannot write to the server: {exc}") from exc

    def receive(self, deadline: float) -> dict[str, Any]:
        while True:
            end = self._stdout.find(b"\n")
            if end >= 0:
                line = bytes(self._stdout[:end])
                del self._stdout[: end + 1]
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ServerGone("the server answered with something else than an object")
                return data
            if len(self._stdout) > RUNNER_MAX_REPLY:
                raise ReplyTooLarge(f"the server's answer is over {RUNNER_MAX_REPLY} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerGone("the server did not answer in time")
            sock = self.attached.sock
            try:
                readable, _, _ = select.select([sock], [], [], remaining)
                chunk = sock.recv(1 << 16) if readable else None
            except OSError as exc:
                raise ServerGone(f"the server's stream broke: {exc}") from exc
            if chunk == b"":
                raise ServerGone("the server's stream closed")
            if chunk:
                self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        buffer = self._buffer
        buffer += chunk
        while len(buffer) >= FRAME_HEADER.size:
            kind, size = FRAME_HEADER.unpack_from(buffer)
            if len(buffer) < FRAME_HEADER.size + size:
                return
            payload = buffer[FRAME_HEADER.size : FRAME_HEADER.size + size]
            del buffer[: FRAME_HEADER.size + size]
            if kind == 1:
                self._stdout += payload
            elif len(self.stderr) < 1 << 16:
                self.stderr += payload

    def close(self) -> None:
        self.attached.close()


@dataclass(slots=True)
class PooledRunner:
    """One pooled sandbox and its attached server."""

    container: Container
    stream: ServerStream
    shared: frozenset[str] = frozenset()  # the shared files its server was given
    served: int = 0
    recycle: str | None = None  # why it must not serve another episode


class PooledSandbox(Sandbox):
    """A `Sandbox` whose programs run as one episode of a pooled sandbox's server.

    Failures are classified like a fresh sandbox's (`sandbox.classify`), from what the
    server saw: the operations out of time or memory, or the server's own error. The
    server runs the episode's operations as the episode's uid, yet as root out of its
    reach: if it dies, the kernel's OOM killer did it (memory exhausted) or it is our
    failure.
    """

    root_server = True

    def __init__(self, engine: Engine, runner: PooledRunner, *, episode_id: str) -> None:
        super().__init__(engine, runner.container, episode_id=episode_id)
        self.runner = runner
        self._status: dict[str, Any] = {}

    def _program(self, program: Program, *, timeout_s: float) -> Results:
        runner = self.runner
        if self._status or runner.recycle:
            # the server empties the sandbox after each program: an episode is one program
            raise SandboxError(f"pooled sandbox {self.container.name} already served this episode")
        nonce = secrets.token_hex(16)
        spec = self.container.spec
        runner.served += 1
        message = {
            "request": program.request(nonce, runner.shared).decode(),
            "timeout_s": timeout_s,
            "limits": {
                "RLIMIT_NPROC": spec.pids,
                "RLIMIT_NOFILE": NOFILE,
                "RLIMIT_FSIZE": spec.disk_mb << 20,
                "RLIMIT_CORE": 0,
                # a backstop: the server's deadline ends the episode first
                "RLIMIT_CPU": int(timeout_s * max(spec.cpus, 1.0)) + 10,
            },
        }
        try:
            runner.stream.send(message)
            status = runner.stream.receive(time.monotonic() + timeout_s + RUNNER_GRACE_S)
        except ReplyTooLarge as exc:
            self._status = {"lost": True}
            runner.recycle = str(exc)  # the rest of the answer is still on its way
            raise self.broken(Evidence(oversized=True, detail=str(exc))) from exc
        except (ServerGone, ValueError) as exc:
            self._status = {"lost": True}
            runner.recycle = str(exc)
            raise self._server_lost(str(exc)) from exc
        if "error" in status:
            self._status = status
            runner.recycle = str(status["error"])
            raise SandboxError(f"the pooled sandbox's server failed: {status['error']}")
        self._status = status
        runner.recycle = status.get("recycle") or None
        if runner.recycle:
            log.info(
                "episode %s pooled sandbox %s: recycled: %s",
                self.episode_id,
                self.container.name,
                runner.recycle,
            )
        if status.get("timed_out"):
            raise self.broken(Evidence(timed_out=True, detail="no reply in time"))
        exit_code = status.get("exit_code")
        stderr = str(status.get("stderr", ""))[-500:]
        try:
            data = json.loads(status.get("reply") or "null")
            if isinstance(data, dict) and data.get("nonce") != nonce:
                raise self.broken(Evidence(forged=True, exit_code=exit_code))
            if not isinstance(data, dict):
                raise ValueError("no reply")
            reply = Reply.decode(data)
        except (ValueError, RecursionError) as exc:
            raise self.broken(
                Evidence(
                    exit_code=exit_code,
                    exception="MemoryError" if exit_code == EXIT_NO_MEMORY else None,
                    detail=stderr or f"no reply (exit {exit_code})",
                )
            ) from exc
        return Results(program, reply)

    def _server_lost(self, detail: str) -> Exception:
        """The server gave no answer: the sandbox's end, the OOM killer, or ours. The server
        runs as root, so the code under test cannot signal it; the kernel's OOM killer can
        (tmpfs pages belong to no process, so a full /tmp makes the largest process, the
        server, its choice), and the sandbox's cgroup counts what it killed."""
        where = f"episode {self.episode_id} pooled sandbox {self.container.name}"
        lost = f"server lost ({detail}); its stderr: {bytes(self.runner.stream.stderr[-500:])!r}"
        try:
            usage = self.engine.usage(self.container.id)
            # no process left: the OOM killer took the sandbox's init too, and the engine has
            # not seen it stop yet (its stats are of an emptied cgroup): read it once stopped
            deadline = time.monotonic() + STOPPING_S
            while usage.running and not usage.pids and time.monotonic() < deadline:
                time.sleep(0.1)
                usage = self.engine.usage(self.container.id)
        except SandboxError as exc:
            log.warning("%s: %s", where, lost)
            return exc
        kills = None
        if usage.running:
            kills = self.engine.oom_kills(self.container.id)
            try:
                kills = self._oom_kills() if kills is None else kills
            except SandboxError:  # an exec into a cgroup whose memory is full may not start
                kills = None
        # A sandbox is replaced after the first time its memory limit is hit, so a kill or a
        # hit is this episode's. A dead server frees its own memory, so a sandbox still
        # within the server's share of its limit was full.
        full = (
            usage.running
            and usage.memory is not None
            and bool(usage.memory_limit)
            and usage.memory >= (usage.memory_limit or 0) - (POOLED_SERVER_MB << 20)
        )
        log.warning("%s: %s; then %s, OOM kills %s", where, lost, usage, kills)
        if kills or usage.memory_hits or full:
            hits = max(usage.memory_hits or 0, kills or 0, int(full))
            usage = replace(usage, memory_hits=hits)
            return self.broken(Evidence(usage=usage, exit_code=SIGKILLED, detail=detail))
        return self.broken(Evidence(usage=usage, detail=f"the pooled sandbox's server: {detail}"))

    def _oom_kills(self) -> int | None:
        """How many processes the OOM killer ended in this sandbox (its cgroup's count; a
        pooled sandbox is replaced after any, so these are this episode's)."""
        result = self.engine.exec(self.container.id, ["sh", "-c", OOM_COUNTS], timeout_s=10)
        return oom_kill_count(result.stdout.decode(errors="replace"))

    def usage(self) -> Usage:
        """This episode's view: the memory limit hit during it, not in the sandbox's life."""
        status = self._status
        return Usage(
            running=True,
            oom_killed=bool(status.get("oom_killed")),
            memory_hits=int(status.get("memory_hits") or 0),
        )

    @property
    def episode_faults(self) -> int | None:
        """The minor page faults its episode's processes took (None: it has not run)."""
        faults = self._status.get("faults")
        return int(faults) if faults is not None else None

    def reclaim(self) -> bool:
        return False  # a pooled sandbox that ran out of memory is thrown away instead

    def kill_all(self) -> None:
        """Nothing to do: the server killed the episode's processes before answering."""

    def oom_killed(self) -> bool:
        return bool(self._status.get("oom_killed"))


@cache
def server_input() -> bytes:
    """What the pooled server's `BOOT` reads first: the runner with the server as its entry."""
    return runner_input((ASSETS / "pool_server.py").read_text(encoding="utf-8"))


def shared_line(names: frozenset[str]) -> bytes:
    """The server's first line: the shared files `names`, given once."""
    return json.dumps({"shared": {n: shared_base64(n) for n in sorted(names)}}).encode() + b"\n"


class RunnerPool(StartedPool[PooledRunner]):
    """The pooled sandboxes of one worker process, by spec: idle ones wait for an episode
    (`size` of them kept started per spec); each serves `episodes` before it is replaced."""

    what = "pooled"

    def __init__(
        self,
        engine: Engine,
        *,
        episodes: int,
        size: int = 1,
        threads: int = 2,
        budget: Budget | None = None,
        floor: int = 1,
    ) -> None:
        super().__init__(engine, size=size, threads=threads, budget=budget, floor=floor)
        self.episodes = episodes

    def acquire(self, spec: SandboxSpec, *, episode_id: str) -> tuple[PooledSandbox, bool]:
        """A pooled sandbox for one episode, and whether it was already started."""
        runner = self._take(spec)
        warm = runner is not None
        if runner is None:
            runner = self._start(spec)
        return PooledSandbox(self.engine, runner, episode_id=episode_id), warm

    def release(self, sandbox: PooledSandbox) -> None:
        """Back to the pool when its server says it is clean; thrown away otherwise, and
        when a shared file was registered after it started (it would carry it in every
        request: its replacement is given it once)."""
        runner = sandbox.runner
        spec = runner.container.spec
        reusable = runner.recycle is None and runner.served < self.episodes
        if reusable and runner.shared.issuperset(SHARED_FILES) and self._keep(spec, runner):
            return
        self._discard(runner)
        self._refill(spec)

    def _start(self, spec: SandboxSpec) -> PooledRunner:
        name = f"proctor-{'pooled-' if spec.pooled else ''}{uuid.uuid4().hex[:12]}"
        container = self.engine.create(
            spec, name=name, labels={POOL_LABEL: "pooled"}, main=SERVER_COMMAND
        )
        try:
            attached = self.engine.attach_main(container.id)
            stream = ServerStream(attached)
            attached.sock.sendall(server_input())
            shared = frozenset(SHARED_FILES)
            attached.sock.sendall(shared_line(shared))
            ready = stream.receive(time.monotonic() + SERVER_START_S)
            if ready.get("ready") is not True:
                raise ServerGone(f"the server did not start: {ready}")
        except (ServerGone, OSError, ValueError) as exc:
            self.engine.remove(container.id)
            raise SandboxError(f"pooled sandbox from {spec.image}: {exc}") from exc
        except SandboxError:
            self.engine.remove(container.id)
            raise
        return PooledRunner(container=container, stream=stream, shared=shared)

    def _remove(self, item: PooledRunner) -> None:
        item.stream.close()
        self.engine.remove(item.container.id)
