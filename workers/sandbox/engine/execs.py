"""Execs: run a command in a sandbox over a raw socket, so stdin can be streamed in and a
deadline enforced while reading (`exec_run` has neither); attach to a server's main
process."""

from __future__ import annotations

import logging
import select
import socket
import struct
import time

import requests
from docker.errors import DockerException

from workers.sandbox.engine.base import EngineBase
from workers.sandbox.engine.errors import ExecStreamBroken, exec_failed, wrap
from workers.sandbox.engine.specs import Attached, ExecResult

log = logging.getLogger(__name__)


FRAME_HEADER = struct.Struct(">BxxxL")


class Execs(EngineBase):
    """Execs into sandboxes and attaching to a server's main process."""

    def attach_main(self, container_id: str) -> Attached:
        """The container's main process's stdin and output (Docker's stdout/stderr frames),
        over one socket. Closing it ends that stdin."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        try:
            raw = self.api.attach_socket(container_id, params=params)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise exec_failed(exc, container_id) from exc
        return Attached(sock=getattr(raw, "_sock", raw), handle=raw)

    def exec(
        self,
        container_id: str,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        user: str = "",
        timeout_s: float = 30.0,
        max_output: int = 1 << 20,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        exit_code: bool = True,
    ) -> ExecResult:
        """Run argv in the container; stream stdin in; stop reading at the deadline.

        On a timeout the process is still running: the caller decides how to kill it
        (usually every process of the sandbox user, see `Sandbox.kill_all`). Without
        `exit_code` the engine is not asked for it (one call or more: the stream closes a
        moment before the exec is marked done); `exit_code_of` asks later, if it matters.
        """
        started = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                container_id,
                argv,
                stdin=stdin is not None,
                stdout=True,
                stderr=True,
                user=user,
                environment=env,
                workdir=workdir,
            )["Id"]
            raw = self.api.exec_start(exec_id, socket=True)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise exec_failed(exc, container_id) from exc
        sock: socket.socket = getattr(raw, "_sock", raw)
        try:
            # never block past the deadline, also not on writing stdin to a stuck exec
            sock.settimeout(max(timeout_s, 1.0))
            if stdin is not None:
                sock.sendall(stdin)
                sock.shutdown(socket.SHUT_WR)
            out, err, timed_out, truncated = _read_frames(sock, started + timeout_s, max_output)
        except TimeoutError:
            out, err, timed_out, truncated = bytearray(), bytearray(), True, {1: False, 2: False}
        except OSError as exc:
            raise ExecStreamBroken(f"exec stream in {container_id[:12]} broke: {exc}") from exc
        finally:
            sock.close()
            raw.close()
        return ExecResult(
            exit_code=self.exit_code_of(exec_id) if exit_code and not timed_out else None,
            stdout=bytes(out),
            stderr=bytes(err),
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            stdout_truncated=truncated[1],
            stderr_truncated=truncated[2],
            exec_id=exec_id,
        )

    def exit_code_of(self, exec_id: str) -> int | None:
        """An exec's exit code, once the engine marks it done (None: not within ~0.5 s)."""
        for _ in range(50):  # the stream can close a moment before the exec is marked done
            try:
                info = self.api.exec_inspect(exec_id)
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise wrap(exc, "inspect an exec") from exc
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.01)
        return None


def _read_frames(
    sock: socket.socket, deadline: float, max_output: int
) -> tuple[bytearray, bytearray, bool, dict[int, bool]]:
    """Demultiplex Docker's stdout/stderr frames until EOF or the deadline."""
    streams = {1: bytearray(), 2: bytearray()}
    truncated = {1: False, 2: False}
    buffer = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return streams[1], streams[2], True, truncated
        readable, _, _ = select.select([sock], [], [], remaining)
        if not readable:
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return streams[1], streams[2], False, truncated
        buffer += chunk
        while len(buffer) >= FRAME_HEADER.size:
            kind, size = FRAME_HEADER.unpack_from(buffer)
            if len(buffer) < FRAME_HEADER.size + size:
                break
            payload = buffer[FRAME_HEADER.size : FRAME_HEADER.size + size]
            del buffer[: FRAME_HEADER.size + size]
            target = streams.get(kind)
            if target is None:
                continue
            room = max_output - len(target)
            if room < len(payload):
                truncated[kind] = True
            if room > 0:
                target += payload[:room]
