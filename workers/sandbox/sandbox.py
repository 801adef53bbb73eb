"""One sandbox: a container plus the in-sandbox runner that does the work inside it."""

from __future__ import annotations

import errno
import json
import logging
import marshal
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cache
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any, ClassVar

from proctor.models import Verdict
from workers.sandbox import protocol
from workers.sandbox.docker import (
    Container,
    ContainerStopped,
    Engine,
    ExecStreamBroken,
    SandboxError,
    Usage,
)
from workers.sandbox.protocol import EXIT_NO_MEMORY, KillAll, Op, Program, Reply, Results

log = logging.getLogger(__name__)

# The runner comes through stdin ahead of its request, so a process listing inside or
# outside the sandbox shows a short command, not the source: a header line (this worker's
# bytecode magic number and two lengths), the runner as this worker compiled it (marshal),
# then its source. An interpreter with the same magic number runs the code and skips
# compiling ~46 kB of source, ~12 ms of CPU of every exec; any other compiles the source.
# Out of memory before it can reply, the runner says so by its exit status.
BOOT = (
    "import sys\n"
    "try:\n"
    " i=sys.stdin.buffer;m,c,s=i.readline().split();c=i.read(int(c));s=i.read(int(s))\n"
    " if m.decode()==getattr(sys.modules.get('_frozen_importlib_external'),"
    "'MAGIC_NUMBER',b'').hex():import marshal;p=marshal.loads(c)\n"
    " else:p=compile(s,'proctor-runner','exec')\n"
    " del i,m,c,s;exec(p)\n"
    f"except MemoryError:\n sys.exit({EXIT_NO_MEMORY})"
)

# Beyond the run timeouts inside a program, how long the runner may take to answer.
RUNNER_GRACE_S = 15.0
RUNNER_MAX_REPLY = 64 << 20
# Memory lent for a moment to a sandbox the code under test filled, so the runner can start
# and empty the scratch mounts; taken back before anything is graded.
RECLAIM_HEADROOM_MB = 64


ASSETS = Path(__file__).with_name("assets")


@cache
def runner_source(entry: str = "launch(main)") -> bytes:
    """The protocol's source, then the runner's, then `entry`: one script, sharing the
    definitions (the pooled server's entry is its own source, `assets/pool_server.py`)."""
    parts = [
        Path(protocol.__file__).read_bytes(),
        (ASSETS / "runner.py").read_bytes(),
        (ASSETS / "judge.py").read_bytes(),  # `Run.judge`
    ]
    return b"\n\n".join([*parts, entry.encode()]) + b"\n"


def boot_input(source: bytes, *, magic: bytes = MAGIC_NUMBER) -> bytes:
    """What `BOOT` reads ahead of the request to run `source`: the header, the code this
    interpreter compiles from it (run where the sandbox's interpreter has the same `magic`),
    the source (compiled there otherwise)."""
    code = marshal.dumps(compile(source, "proctor-runner", "exec", dont_inherit=True))
    return b"%s %d %d\n" % (magic.hex().encode(), len(code), len(source)) + code + source


@cache
def runner_input(entry: str = "launch(main)") -> bytes:
    """`boot_input` of the runner with `entry`, made once per worker process."""
    return boot_input(runner_source(entry))


@dataclass(frozen=True, slots=True)
class Evidence:
    """What is known about a runner that failed, from the reply and from the engine."""

    usage: Usage | None = None  # asked of the engine when the runner gave no reply
    errno: int | None = None  # of the operation that raised, in the runner's reply
    exception: str | None = None  # its type name
    exit_code: int | None = None  # of the runner's exec
    timed_out: bool = False  # the runner did not answer within its program's time
    forged: bool = False  # a reply that did not carry our nonce
    oversized: bool = False  # a reply past what a worker reads of one
    detail: str = ""


class Cause(StrEnum):
    """What a runner failure comes down to (the reason says it in words)."""

    memory = "memory"  # exhausted in a running sandbox: `reclaim` may free it
    pids = "pids"
    resources = "resources"  # an operation failed with an errno: space, files, …
    timeout = "timeout"
    forged = "forged"
    oversized = "oversized"  # the reply outgrew its limit: the sandbox's data made it so
    nested = "nested"  # an operation recursed too deep into what the code under test made
    killed = "killed"
    stopped = "stopped"  # the container stopped
    image = "image"  # the image cannot run python3
    runner = "runner"  # the runner itself failed


@dataclass(frozen=True, slots=True)
class Failure:
    verdict: Verdict
    reason: str
    cause: Cause = Cause.runner

    @property
    def ours(self) -> bool:
        return self.verdict is Verdict.infra_error


SIGKILLED = 128 + 9  # the exit status of a process ended by SIGKILL
PIDS_EXHAUSTED = "the sandbox's process limit was exhausted"
MEMORY_EXHAUSTED = (
    "the sandbox's memory was exhausted (files in /tmp, /dev/shm and the "
    "workspace count against it)"
)
MEMORY_SLACK = 8 << 20  # a working set this close to the limit leaves no room for the runner
ERRNO_REASONS = {
    errno.EAGAIN: PIDS_EXHAUSTED,
    errno.ENOMEM: MEMORY_EXHAUSTED,
    errno.ENOSPC: "the workspace/tmp ran out of space",
    errno.EDQUOT: "the workspace/tmp ran out of space",
    errno.EMFILE: "the sandbox ran out of open files",
    errno.ENFILE: "the sandbox ran out of open files",
}


def classify(evidence: Evidence) -> Failure:
    """The one place that decides whose fault a runner failure was.

    The runner runs as the code under test's uid in a sandbox the code under test has
    shaped, so what it can do to the runner is a typed verdict with reward 0; only the
    engine failing, a container stopped without the code under test being able to, an
    image without python3 or our own bug is `infra_error`. The first rule that applies:

    | evidence                                         | verdict       |
    |--------------------------------------------------|---------------|
    | container stopped, OOM-killed or by SIGKILL      | oom           |
    | container stopped otherwise                      | infra_error   |
    | OOMKilled, ENOMEM/MemoryError, memory at limit   | oom           |
    | EAGAIN, pids.current at the pids limit           | runtime_error |
    | ENOSPC, EDQUOT, EMFILE, ENFILE, any other errno  | runtime_error |
    | an operation raised RecursionError               | runtime_error |
    | a reply past the size a worker reads             | runtime_error |
    | the runner did not answer in time                | timeout       |
    | the runner killed by a signal, memory limit hit  | oom           |
    | a forged reply; the runner killed by a signal    | runtime_error |
    | exec failed (126/127): python3 not found         | infra_error   |
    | exec failed (126/127), memory limit hit          | oom           |
    | exec failed (126/127) otherwise                  | runtime_error |
    | otherwise (the runner itself failed)             | infra_error   |
    """
    usage, detail = evidence.usage, evidence.detail
    if usage is not None and not usage.running:
        # The sandbox's keeper runs as root, out of the code under test's reach: what
        # kills it (SIGKILL: exit 137) is the kernel's OOM killer when the sandbox's memory
        # — tmpfs pages included — is exhausted, whether or not the engine saw it as an OOM
        # of the init. Any other end of the keeper (the engine stopping it) is ours.
        if usage.oom_killed or usage.exit_code == SIGKILLED:
            return Failure(Verdict.oom, "the sandbox was killed for lack of memory", Cause.stopped)
        return Failure(
            Verdict.infra_error, f"the sandbox container stopped: {detail}", Cause.stopped
        )
    near_limit = (
        usage is not None
        and usage.memory is not None
        and bool(usage.memory_limit)
        and usage.memory >= (usage.memory_limit or 0) - MEMORY_SLACK
    )
    if (
        evidence.errno == errno.ENOMEM
        or evidence.exception == "MemoryError"
        or near_limit
        or (usage is not None and usage.oom_killed)
    ):
        return Failure(Verdict.oom, MEMORY_EXHAUSTED, Cause.memory)
    if evidence.errno == errno.EAGAIN or (
        usage is not None
        and usage.pids is not None
        and bool(usage.pids_limit)
        and usage.pids >= (usage.pids_limit or 0)
    ):
        return Failure(Verdict.runtime_error, PIDS_EXHAUSTED, Cause.pids)
    if evidence.errno is not None:
        # an operation on files and processes the code under test has shaped
        reason = ERRNO_REASONS.get(evidence.errno, "an operation in the sandbox failed")
        return Failure(
            Verdict.runtime_error, f"{reason} ({detail})" if detail else reason, Cause.resources
        )
    if evidence.exception == "RecursionError":
        # a tree or a document the code under test nested deeper than the runner can follow
        return Failure(
            Verdict.runtime_error,
            f"the sandbox held something nested too deep to handle ({detail})",
            Cause.nested,
        )
    if evidence.oversized:
        # what it carries is what the sandbox printed, wrote or named: ours is bounded
        return Failure(
            Verdict.runtime_error,
            "the sandbox's output outgrew what a reply may carry",
            Cause.oversized,
        )
    if evidence.timed_out:
        return Failure(
            Verdict.timeout, "the sandbox did not answer within its time limit", Cause.timeout
        )
    if evidence.forged:
        return Failure(Verdict.runtime_error, "the sandbox runner's reply was forged", Cause.forged)
    code = evidence.exit_code
    killed = code is not None and (code < 0 or code > 128)
    if killed and usage is not None and usage.memory_hits:
        return Failure(Verdict.oom, MEMORY_EXHAUSTED, Cause.memory)
    if killed:
        return Failure(
            Verdict.runtime_error,
            "the sandbox runner was killed (every process of the sandbox user "
            "may be signalled by the code under test)",
            Cause.killed,
        )
    if code in (126, 127):
        if "not found" in detail or "no such file" in detail.lower():
            return Failure(
                Verdict.infra_error, f"the image cannot run python3: {detail}", Cause.image
            )
        # The image ran python3 when the worker checked it, so a runtime that cannot start
        # the runner now is facing a sandbox its code has exhausted (memory, most often).
        if usage is not None and usage.memory_hits:
            return Failure(Verdict.oom, MEMORY_EXHAUSTED, Cause.memory)
        return Failure(
            Verdict.runtime_error,
            f"the sandbox could not start the runner any more ({detail})",
            Cause.resources,
        )
    return Failure(Verdict.infra_error, f"the sandbox runner failed: {detail}", Cause.runner)


class RunnerBroken(Exception):
    """The runner gave no usable reply, and the evidence says the code under test caused it
    (it shares the runner's uid and sandbox); `failure` holds the verdict and reason.

    When the evidence says our infrastructure failed, `SandboxError` is raised instead.
    """

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


class Sandbox:
    # whether a root server runs its programs (`pooled.PooledSandbox`): only one can start a
    # process as a uid other than the episode's (a split run's grader)
    root_server: ClassVar[bool] = False

    def __init__(self, engine: Engine, container: Container, *, episode_id: str) -> None:
        self.engine = engine
        self.container = container
        self.episode_id = episode_id

    @property
    def user(self) -> str:
        return self.container.spec.user

    def program(
        self, ops: Sequence[Op[Any]], *, timeout_s: float, reclaim: bool = False
    ) -> Results:
        """Run a list of runner operations in one exec; their results, by operation.

        Raises RunnerBroken (the code under test broke the runner, with its verdict) or
        SandboxError (our infrastructure failed), decided by `classify`. With `reclaim`, a
        runner that could not start for lack of memory gets one more try after `reclaim`.
        """
        program = Program(ops)
        try:
            return self._program(program, timeout_s=timeout_s)
        except RunnerBroken as exc:
            if not (reclaim and exc.failure.cause is Cause.memory and self.reclaim()):
                raise
        return self._program(program, timeout_s=timeout_s)

    def reclaim(self) -> bool:
        """Free the memory the code under test's files in /tmp and /dev/shm hold (tmpfs
        pages cannot be swapped out, so no process can start): lend the sandbox headroom,
        kill every process of its user and empty the scratch mounts, then take the
        headroom back. False when the memory stays taken (by the workspace, say)."""
        limit = self.container.spec.memory_mb
        self.engine.set_memory(self.container.id, limit + RECLAIM_HEADROOM_MB)
        try:
            reply: Results | None = self._program(
                Program([KillAll(empty_scratch=True)]), timeout_s=10
            )
        except RunnerBroken:
            reply = None
        finally:
            try:
                self.engine.set_memory(self.container.id, limit)
                restored = True
            except SandboxError as exc:  # the kernel cannot fit the sandbox in its limit
                log.info(
                    "episode %s container %s: memory stays exhausted: %s",
                    self.episode_id,
                    self.container.name,
                    exc,
                )
                restored = False
        return restored and reply is not None

    def _program(self, program: Program, *, timeout_s: float) -> Results:
        nonce = secrets.token_hex(16)
        payload = runner_input() + program.request(nonce)
        try:
            result = self.engine.exec(
                self.container.id,
                ["python3", "-I", "-S", "-c", BOOT],
                stdin=payload,
                user=self.user,
                timeout_s=timeout_s + RUNNER_GRACE_S,
                max_output=RUNNER_MAX_REPLY,
                exit_code=False,  # a reply with our nonce is all that matters
            )
        except ExecStreamBroken as exc:  # the runner may have died before reading its stdin
            raise self.broken(Evidence(exit_code=-9, detail=str(exc))) from exc
        except ContainerStopped as exc:  # the engine's state of the sandbox says why
            raise self.broken(Evidence(detail=str(exc))) from exc
        if result.timed_out:
            raise self.broken(Evidence(timed_out=True, detail="no reply in time"), kill=True)
        if result.stdout_truncated:
            raise self.broken(Evidence(oversized=True, detail=f"over {RUNNER_MAX_REPLY} bytes"))
        try:
            data = json.loads(result.stdout)
            if not isinstance(data, dict) or data.get("nonce") != nonce:
                code = self.engine.exit_code_of(result.exec_id)
                raise self.broken(Evidence(forged=True, exit_code=code))
            reply = Reply.decode(data)
        except (ValueError, RecursionError) as exc:  # no JSON, or not the protocol's
            code = self.engine.exit_code_of(result.exec_id)
            stderr = result.stderr.decode(errors="replace")[-500:]
            log.warning(
                "episode %s container %s: runner reply unusable (%s, exit %s); stderr=%r",
                self.episode_id,
                self.container.name,
                exc,
                code,
                stderr[-300:],
            )
            raise self.broken(
                Evidence(
                    exit_code=code,
                    exception="MemoryError" if code == EXIT_NO_MEMORY else None,
                    detail=stderr or f"no reply (exit {code})",
                )
            ) from exc
        return Results(program, reply)

    def broken(self, evidence: Evidence, *, kill: bool = False) -> RunnerBroken | SandboxError:
        """The exception for a runner that failed: the engine's view of the sandbox is the
        evidence of who made it fail."""
        if evidence.usage is None and evidence.errno is None:
            evidence = replace(evidence, usage=self.usage())
        if kill:
            try:
                self.kill_all()
            except SandboxError as exc:
                log.warning(
                    "episode %s container %s: could not kill its processes: %s",
                    self.episode_id,
                    self.container.name,
                    exc,
                )
        failure = classify(evidence)
        log.info(
            "episode %s container %s: runner failed: %s (%s)",
            self.episode_id,
            self.container.name,
            failure.reason,
            failure.verdict.value,
        )
        if failure.ours:
            return SandboxError(failure.reason)
        return RunnerBroken(failure)

    def failure_of(self, results: Results) -> RunnerBroken | SandboxError:
        """The exception for a program whose operation raised (see `broken`)."""
        error = results.error
        evidence = (
            Evidence()
            if error is None
            else Evidence(errno=error.errno, exception=error.exception, detail=error.message)
        )
        if evidence.errno is None and evidence.exception is None:
            evidence = replace(evidence, usage=self.usage())
        failure = classify(evidence)
        if failure.ours:
            return SandboxError(failure.reason)
        return RunnerBroken(failure)

    def usage(self) -> Usage:
        """The engine's view of the sandbox: the evidence of who made its runner fail."""
        return self.engine.usage(self.container.id)

    def kill_all(self) -> None:
        """SIGKILL every process of the sandbox user, whatever session it escaped to."""
        self.engine.exec(self.container.id, ["kill", "-9", "-1"], user=self.user, timeout_s=10)

    def oom_killed(self) -> bool:
        return self.engine.oom_killed(self.container.id)
