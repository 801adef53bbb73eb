"""The typed wrapper around the Docker SDK; the only module that imports `docker`.

Errors (all infrastructure — never the code under test's fault):

    SandboxError
    ├── DockerUnavailable   the engine does not answer
    ├── ImageMissing        the image is not on this host (we never pull at run time)
    └── ProtectionMissing   the engine would run a sandbox without a required protection

Containers are made with `create` + `start` (never `run`, which silently pulls), exec'd into
over a raw socket so stdin can be streamed in and a deadline enforced while reading
(`exec_run` has neither), and removed with force.
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

log = logging.getLogger(__name__)

MANAGED_LABEL = "org.proctor.managed"
WORKER_LABEL = "org.proctor.worker"
HOST_LABEL = "org.proctor.host"
POOL_LABEL = "org.proctor.pool"
DEPLOYMENT_LABEL = "org.proctor.deployment"
FRAME_HEADER = struct.Struct(">BxxxL")
SANDBOX_HOME = "/home/sandbox"
WORKSPACE = "/workspace"
API_TIMEOUT_S = 60


class SandboxError(Exception):
    """Our infrastructure failed; the episode gets `infra_error`, never a 0 reward."""


class DockerUnavailable(SandboxError):
    pass


class ImageMissing(SandboxError):
    pass


class ProtectionMissing(SandboxError):
    pass


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """Everything that decides how a sandbox container is made (and so which pool fits)."""

    image: str
    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 128
    disk_mb: int = 256
    network: str = "none"
    dns: tuple[str, ...] = ()
    user: str = "1000:1000"
    runtime: str | None = None


@dataclass(slots=True)
class ExecResult:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@dataclass(slots=True)
class Container:
    id: str
    name: str
    spec: SandboxSpec
    started_at: float = field(default_factory=time.monotonic)
    start_s: float = 0.0
    ip: str | None = None  # on the honeypot network; None with no network


def _wrap(exc: Exception, what: str) -> SandboxError:
    if isinstance(exc, ImageNotFound):
        return ImageMissing(f"{what}: image not found ({exc.explanation})")
    if isinstance(exc, requests.exceptions.ConnectionError | FileNotFoundError):
        return DockerUnavailable(f"{what}: the Docker engine does not answer ({exc})")
    return SandboxError(f"{what}: {exc}")


class Engine:
    """One per process: a Docker client plus the calls sandboxes need."""

    def __init__(
        self, *, worker: str, host: str, deployment: str, base_url: str | None = None
    ) -> None:
        try:
            if base_url:
                self.client = docker.DockerClient(base_url=base_url, timeout=API_TIMEOUT_S)
            else:
                self.client = docker.from_env(timeout=API_TIMEOUT_S)
        except DockerException as exc:
            raise DockerUnavailable(f"cannot reach the Docker engine: {exc}") from exc
        self.api = self.client.api
        self.worker = worker
        self.host = host
        self.deployment = deployment
        self._digests: dict[str, str] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ engine

    def ping(self) -> None:
        try:
            self.api.ping()
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise DockerUnavailable(f"the Docker engine does not answer: {exc}") from exc

    def image_digest(self, image: str) -> str:
        """The content digest of a local image (the repo digest when it has one)."""
        with self._lock:
            cached = self._digests.get(image)
        if cached:
            return cached
        try:
            info = self.api.inspect_image(image)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect image {image}") from exc
        digests = info.get("RepoDigests") or []
        digest = digests[0].split("@", 1)[-1] if digests else str(info["Id"])
        with self._lock:
            self._digests[image] = digest
        return digest

    # ------------------------------------------------------------------ containers

    def create(
        self, spec: SandboxSpec, *, name: str, labels: dict[str, str] | None = None
    ) -> Container:
        """Create and start a locked-down sandbox container."""
        started = time.monotonic()
        uid, _, gid = spec.user.partition(":")
        # exec: agents run scripts and compiled programs from their workspace
        tmpfs_opts = f"rw,exec,nosuid,nodev,size={spec.disk_mb}m"
        host_config = self.api.create_host_config(
            network_mode=spec.network,
            dns=list(spec.dns) or None,
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",  # equal: no swap
            nano_cpus=int(spec.cpus * 1e9),
            pids_limit=spec.pids,
            init=True,  # an init that reaps zombies, so they never eat the pids limit
            runtime=spec.runtime,
            oom_score_adj=500,  # under host memory pressure, sandboxes go first
            tmpfs={
                WORKSPACE: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                SANDBOX_HOME: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                "/tmp": f"{tmpfs_opts},mode=1777",
            },
            ulimits=[docker.types.Ulimit(name="nofile", soft=1024, hard=1024)],
            log_config=docker.types.LogConfig(type="none"),
        )
        all_labels = {
            MANAGED_LABEL: "1",
            WORKER_LABEL: self.worker,
            HOST_LABEL: self.host,
            DEPLOYMENT_LABEL: self.deployment,
            **(labels or {}),
        }
        try:
            created = self.api.create_container(
                spec.image,
                command=["sleep", "infinity"],
                # The idle keeper runs as root without capabilities, so the sandbox user
                # (who runs every exec) cannot kill it and take the container down with
                # `kill -1`; nothing of the code under test ever runs as root.
                user="0:0",
                name=name,
                hostname="sandbox",
                working_dir=WORKSPACE,
                labels=all_labels,
                environment={
                    "HOME": SANDBOX_HOME,
                    "LANG": "C.UTF-8",
                    "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONUNBUFFERED": "1",
                },
                host_config=host_config,
                network_disabled=spec.network == "none",
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create sandbox from {spec.image}") from exc
        container_id = str(created["Id"])
        try:
            self.api.start(container_id)
        except (DockerException, requests.exceptions.RequestException) as exc:
            self.remove(container_id)
            raise _wrap(exc, f"start sandbox {name}") from exc
        ip = None
        if spec.network != "none":
            networks = self.inspect(container_id)["NetworkSettings"]["Networks"]
            ip = (networks.get(spec.network) or {}).get("IPAddress") or None
        return Container(
            id=container_id, name=name, spec=spec, start_s=time.monotonic() - started, ip=ip
        )

    def remove(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code == 409:  # removal already in progress
                return
            log.warning("could not remove container %s: %s", container_id[:12], exc)
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not remove container %s: %s", container_id[:12], exc)

    def inspect(self, container_id: str) -> dict[str, Any]:
        try:
            return dict(self.api.inspect_container(container_id))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect {container_id[:12]}") from exc

    def oom_killed(self, container_id: str) -> bool:
        try:
            return bool(self.inspect(container_id)["State"].get("OOMKilled"))
        except SandboxError:
            return False

    def managed_containers(self, *, any_deployment: bool = False,
                           **labels: str) -> list[dict[str, Any]]:
        if not any_deployment:
            labels = {DEPLOYMENT_LABEL: self.deployment, **labels}
        filters = [f"{MANAGED_LABEL}=1"] + [f"{k}={v}" for k, v in labels.items()]
        try:
            return list(self.api.containers(all=True, filters={"label": filters}))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list sandboxes") from exc

    # ------------------------------------------------------------------ networks, services

    def ensure_internal_network(self, name: str) -> None:
        """A network with no route out (internal), created once and shared.

        Docker may let two workers starting together both create it; then all of them
        keep the one with the smallest id and remove the others, so names stay unique.
        """
        try:
            if not self._networks_named(name):
                self.api.create_network(name, driver="bridge", internal=True,
                                        check_duplicate=True,
                                        labels={DEPLOYMENT_LABEL: self.deployment})
        except APIError as exc:
            if exc.status_code != 409:
                raise _wrap(exc, f"create network {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create network {name}") from exc
        for duplicate in sorted(self._networks_named(name))[1:]:
            try:
                self.api.remove_network(duplicate)
            except (DockerException, requests.exceptions.RequestException) as exc:
                log.warning("could not remove duplicate network %s: %s", duplicate[:12], exc)

    def _networks_named(self, name: str) -> list[str]:
        try:
            listed = self.api.networks(names=[name])
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"list networks named {name}") from exc
        return [str(n["Id"]) for n in listed if n.get("Name") == name]

    def ensure_service(
        self,
        name: str,
        *,
        image: str,
        command: list[str],
        network: str,
        user: str,
        sysctls: dict[str, str],
        labels: dict[str, str],
    ) -> dict[str, Any]:
        """A long-running helper container (the honeypot): started if absent; its inspect."""
        try:
            info = dict(self.api.inspect_container(name))
            if info["State"].get("Running"):
                return info
            self.api.remove_container(name, force=True)
        except NotFound:
            pass
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect {name}") from exc
        host_config = self.api.create_host_config(
            network_mode=network, read_only=True, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], sysctls=sysctls, mem_limit="128m",
            pids_limit=256, restart_policy={"Name": "unless-stopped"},
            log_config=docker.types.LogConfig(type="json-file",
                                              config={"max-size": "20m", "max-file": "3"}),
        )
        try:
            self.api.create_container(image, command=command, name=name, user=user,
                                      labels=labels, host_config=host_config)
        except APIError as exc:
            if exc.status_code != 409:  # another worker made it first: use theirs
                raise _wrap(exc, f"create {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create {name}") from exc
        try:
            self.api.start(name)
            return dict(self.api.inspect_container(name))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"start {name}") from exc

    def logs(self, name: str, *, since: float, until: float) -> str:
        try:
            raw = self.api.logs(name, stdout=True, stderr=False, since=int(since),
                                until=int(until) + 1, timestamps=False)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"read the log of {name}") from exc
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)

    # ------------------------------------------------------------------ exec

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
    ) -> ExecResult:
        """Run argv in the container; stream stdin in; stop reading at the deadline.

        On a timeout the process is still running: the caller decides how to kill it
        (usually every process of the sandbox user, see `Sandbox.kill_all`).
        """
        started = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                container_id, argv, stdin=stdin is not None, stdout=True, stderr=True,
                user=user, environment=env, workdir=workdir,
            )["Id"]
            raw = self.api.exec_start(exec_id, socket=True)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"exec in {container_id[:12]}") from exc
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
            raise SandboxError(f"exec stream in {container_id[:12]} broke: {exc}") from exc
        finally:
            sock.close()
            raw.close()
        exit_code = None if timed_out else self._exit_code(exec_id)
        return ExecResult(
            exit_code=exit_code,
            stdout=bytes(out),
            stderr=bytes(err),
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            stdout_truncated=truncated[1],
            stderr_truncated=truncated[2],
        )

    def _exit_code(self, exec_id: str) -> int | None:
        for _ in range(50):  # the stream can close a moment before the exec is marked done
            try:
                info = self.api.exec_inspect(exec_id)
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise _wrap(exc, "inspect an exec") from exc
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
