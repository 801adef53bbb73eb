"""The typed wrapper around the Docker SDK; the only module that imports `docker`.

Errors (all infrastructure — never the code under test's fault):

    SandboxError
    ├── DockerUnavailable   the engine does not answer
    ├── ImageMissing        the image is not on this host (names are never pulled)
    ├── PullFailed          the registry or the engine failed a task image's pull, or it
    │                       outlasted its bound (`pull`)
    ├── ProtectionMissing   the engine would run a sandbox without a required protection
    └── ExecStreamBroken    an exec's stream broke: the engine's fault, unless the process
                            in the sandbox died early (`Sandbox` asks the engine which)

ImageNotInRegistry (not a SandboxError: the task's fault) says the registry answered that
a task image reference does not exist.

Containers are made with `create` + `start` (never `run`, which silently pulls), exec'd into
over a raw socket so stdin can be streamed in and a deadline enforced while reading
(`exec_run` has neither), and removed with force.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from workers.sandbox import untrusted

log = logging.getLogger(__name__)

MANAGED_LABEL = "org.proctor.managed"
WORKER_LABEL = "org.proctor.worker"
HOST_LABEL = "org.proctor.host"
POOL_LABEL = "org.proctor.pool"
DEPLOYMENT_LABEL = "org.proctor.deployment"
FRAME_HEADER = struct.Struct(">BxxxL")
SANDBOX_HOME = "/home/sandbox"
WORKSPACE = "/workspace"
OWN_MOUNTS = (WORKSPACE, SANDBOX_HOME, "/tmp")
API_TIMEOUT_S = 60
STATS_TRIES = 2  # a sandbox that stopped under the stats read is read again (`usage`)
# where the engine puts a container's memory cgroup, seen from the host: cgroup v1 with
# the cgroupfs driver, v2 with the systemd driver, v2 with cgroupfs
MEMORY_CGROUPS = (
    "/sys/fs/cgroup/memory/docker/{id}/memory.oom_control",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.events",
    "/sys/fs/cgroup/docker/{id}/memory.events",
)
# a sandbox's own network is labelled with the sandbox container's name
SANDBOX_NETWORK_LABEL = "org.proctor.sandbox-network"
ICC_OPTION = "com.docker.network.bridge.enable_icc"
# a bridge with no address of the host's on it: nothing on the host is one hop away
NO_HOST_ADDRESS_OPTION = "com.docker.network.bridge.inhibit_ipv4"
NO_MASQUERADE_OPTION = "com.docker.network.bridge.enable_ip_masquerade"
SANDBOX_PREFIX = 29  # gateway, the peer, the sandbox: 8192 networks in a /16
SUBNET_TRIES = 16
NETWORK_PRUNE_AGE_S = 120.0  # younger networks may still be waiting for their sandbox
SERVICE_START_S = 10.0
SPARE_NETWORKS = 8  # sandbox networks kept per worker process for the next sandboxes
# A network holder: a tiny container whose network namespace fresh sandboxes join, one at
# a time (`Holder`). Its label says so; its own network, if any, is labelled with its name.
HOLDER_LABEL = "org.proctor.netns"
# `sleep` needs well under 1 MiB and 1 pid, but the runtime's own set-up runs in the
# container's cgroup first (`runc init`, a Go program with threads of its own): tighter
# limits than these made a start fail now and then ("cannot start a stopped process")
HOLDER_MEMORY_MB = 64
HOLDER_PIDS = 16
HOLDER_TRIES = 2
# gVisor's netstack takes no interface of a namespace it joins: its sandboxes keep their own
HOLDER_RUNTIMES = (None, "runc", "crun")
# What a pooled sandbox's root server needs (none of it effective while it acts as an
# episode's uid, and dropped for good in each process of the episode before any code of the
# episode runs): becoming the episode's uid, signalling it, handing it its directories and
# removing whatever it left, whatever modes it set.
POOLED_CAPS = ("SETUID", "SETGID", "KILL", "CHOWN", "FOWNER", "DAC_OVERRIDE")
POOLED_SERVER_MB = 32  # memory for the server beside the episode's own limit
# Nothing a sandbox's processes can write outside what an episode owns and its clean-up
# empties (its workspace, home, /tmp, /mnt, /dev/shm, /dev/mqueue), under every runtime. The list
# replaces the engine's own read-only paths, so it starts with them. /proc/pressure: files
# anyone may write on recent kernels. /sys/fs/cgroup: crun (1.8, cgroup v1) mounts its tmpfs
# world-writable (1777) and never makes it read-only, where runc's is root's 0555; a path
# that is not there is skipped. Each v1 hierarchy is named too: crun's read-only remount of
# the parent happens before it remounts the hierarchies under it read-only, so its copies
# of them would be left writable by root (the pooled server). Cgroup v2 has one
# hierarchy, already read-only.
ENGINE_READ_ONLY_PATHS = (
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
)
CGROUP_V1_HIERARCHIES = (
    "blkio",
    "cpu",
    "cpuacct",
    "cpu,cpuacct",
    "cpuset",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "misc",
    "net_cls",
    "net_prio",
    "net_cls,net_prio",
    "perf_event",
    "pids",
    "rdma",
    "systemd",
)
READ_ONLY_PATHS = (
    *ENGINE_READ_ONLY_PATHS,
    "/proc/pressure",
    "/sys/fs/cgroup",
    *(f"/sys/fs/cgroup/{name}" for name in CGROUP_V1_HIERARCHIES),
)


class SandboxError(Exception):
    """Our infrastructure failed; the episode gets `infra_error`, never a 0 reward."""


class DockerUnavailable(SandboxError):
    pass


class ImageMissing(SandboxError):
    pass


class ProtectionMissing(SandboxError):
    pass


class PullFailed(SandboxError):
    pass


class ImageNotInRegistry(Exception):
    """The registry says a task image reference does not exist: the task's fault, not ours."""


class NetworkGone(SandboxError):
    """A spare sandbox network or network holder was removed meanwhile (pruned by another
    worker, or stopped by an engine restart)."""


class ExecStreamBroken(SandboxError):
    pass


class PathTooLarge(SandboxError):
    """A path read out of an image is over the size asked for (the task's, not ours:
    `workers/repos.py` says so in the episode's result)."""


class ContainerStopped(SandboxError):
    """An exec into a sandbox that is not running (409): why it stopped is the evidence
    (its init killed for lack of memory, most often), read with `Engine.usage`."""


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
    # its main process is a root server that runs each episode as a uid of its own
    # (`pooled.py`): a one-shot episode's program is a line to it, not a `docker exec`
    server: bool = False
    # a long-lived sandbox whose server serves many episodes (a server's, then)
    pooled: bool = False
    # a path of the image the sandbox covers with an empty tmpfs of its own: a repository
    # baked there, whose unsealed history must not be readable (workers/repos.py)
    cover: str | None = None

    @property
    def served(self) -> bool:
        return self.server or self.pooled


@dataclass(slots=True)
class ExecResult:
    exit_code: int | None  # None: timed out, or not asked for (`Engine.exec`'s `exit_code`)
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exec_id: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """What the engine says a running sandbox uses, next to its limits (None: not known)."""

    running: bool
    oom_killed: bool
    pids: int | None = None
    pids_limit: int | None = None
    memory: int | None = None  # working set: usage less inactive page cache
    memory_limit: int | None = None
    # times the memory use hit the limit in the sandbox's life (cgroup v1's failcnt): a
    # runner killed by a signal after that was most likely the OOM killer's doing
    memory_hits: int | None = None
    exit_code: int | None = None  # of a stopped sandbox's init


@dataclass(slots=True)
class Container:
    id: str
    name: str
    spec: SandboxSpec
    started_at: float = field(default_factory=time.monotonic)
    start_s: float = 0.0
    ip: str | None = None  # on the honeypot network; None with no network


@dataclass(frozen=True, slots=True)
class Holder:
    """A network namespace kept from sandbox to sandbox: a container that only sleeps, on
    the network its sandboxes asked for (`none`: loopback alone), which each fresh sandbox
    joins (`network_mode=container:…`) instead of having one made and torn down for it —
    the kernel's namespace, the veth pair and the engine's endpoint cost a fresh container
    more CPU than everything else it does (`bench/oneshot.py`). One sandbox at a time: a
    holder is handed on only after its sandbox was removed, and with it every process that
    could hold a socket. Nothing of the namespace is the code under test's to change (no
    capability), so what a sandbox finds there is what the previous one found."""

    id: str
    name: str
    network: str  # what its sandboxes ask for (`SandboxSpec.network`)
    own_network: str  # its network of its own (the honeypot's isolation), or ""
    ip: str | None  # its address, the address of every sandbox in it; None with no network


@dataclass(frozen=True, slots=True)
class Attached:
    """A long-lived exec's socket; `handle` keeps the HTTP response that owns it alive."""

    sock: socket.socket
    handle: Any

    def close(self) -> None:
        with suppress(OSError):
            self.sock.close()
        with suppress(OSError):
            self.handle.close()


@dataclass(frozen=True, slots=True)
class Isolation:
    """Sandboxes asking for a shared network get one of their own, `peer` their only other
    member: no path from one sandbox to another, whatever the bridge's firewall does."""

    peer: str  # the container name of the one peer (the honeypot)
    subnets: ipaddress.IPv4Network  # where each sandbox's /29 is carved from


def _wrap(exc: Exception, what: str) -> SandboxError:
    if isinstance(exc, ImageNotFound):
        return ImageMissing(f"{what}: image not found ({exc.explanation})")
    if isinstance(exc, requests.exceptions.ConnectionError | FileNotFoundError):
        return DockerUnavailable(f"{what}: the Docker engine does not answer ({exc})")
    return SandboxError(f"{what}: {exc}")


def _not_in_registry(exc: APIError) -> bool:
    """Whether a pull's error is the registry saying the image does not exist (a 404, or
    the same said in the pull's stream), rather than the registry or engine failing."""
    if exc.status_code == 404:
        return True
    text = str(exc.explanation or exc).lower()
    return "manifest unknown" in text or "name unknown" in text


def _exec_failed(exc: Exception, container_id: str) -> SandboxError:
    what = f"exec in {container_id[:12]}"
    # 409 when the exec is created in a stopped container; 500 when it stopped (its init
    # OOM-killed, say) between the exec's creation and its start
    if isinstance(exc, APIError) and exc.status_code in (409, 500) and "not running" in str(exc):
        return ContainerStopped(f"{what}: {exc.explanation}")
    return _wrap(exc, what)


def oom_kill_count(text: str) -> int | None:
    """The `oom_kill` count of a memory cgroup's `memory.oom_control` (v1) or
    `memory.events` (v2) text; None when it has none."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


class Engine:
    """One per process: a Docker client plus the calls sandboxes need."""

    def __init__(
        self,
        *,
        worker: str,
        host: str,
        deployment: str,
        base_url: str | None = None,
        holder_image: str | None = None,
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
        # What network holders are made from: one of the deployment's own images, never a
        # task's (a holder outlives its sandbox and serves the next ones, of any image).
        # None: the sandbox's image (a deployment that serves only its own images).
        self.holder_image = holder_image
        self._digests: dict[str, str] = {}
        self._configs: dict[str, dict[str, Any]] = {}  # image → its `Config` (`untrusted`)
        self._lock = threading.Lock()
        self._isolation: dict[str, Isolation] = {}  # see `isolate`
        self._own_networks: dict[str, str] = {}  # sandbox container id → its own network
        # A sandbox's own network outlives it, for the next sandbox: making one (a bridge,
        # its firewall rules, the peer joining it) costs the engine more than the container
        # itself. Own network → (the shared network it stands for, the peer's address).
        self._network_of: dict[str, tuple[str, str]] = {}
        self._spare_networks: dict[str, list[str]] = {}  # shared network → idle own ones
        self._holder_of: dict[str, Holder] = {}  # sandbox container id → the holder it joined
        self._spare_holders: dict[str, list[Holder]] = {}  # asked-for network → idle holders
        self._closed = False

    # ------------------------------------------------------------------ engine

    def ping(self) -> None:
        try:
            self.api.ping()
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise DockerUnavailable(f"the Docker engine does not answer: {exc}") from exc

    def runtimes(self) -> set[str]:
        """The OCI runtimes registered with the engine (runc and those of its daemon.json)."""
        try:
            return set(self.api.info().get("Runtimes") or {})
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list the engine's runtimes") from exc

    def image_problem(self, image: str) -> str | None:
        """Why this engine cannot run `image` now (None when it can); never cached."""
        try:
            self.api.inspect_image(image)
        except ImageNotFound:
            with self._lock:
                self._digests.pop(image, None)
                self._configs.pop(image, None)
            return f"the image {image} is not on this Docker engine"
        except (DockerException, requests.exceptions.RequestException) as exc:
            return str(_wrap(exc, f"inspect image {image}"))
        return None

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

    def read_path(self, image: str, path: str, into: BinaryIO, *, max_bytes: int) -> bool:
        """Write a tar of `path` in `image` to `into`, read from a container that is created
        and never started (nothing of the image runs); False when the image has no such
        path. Over `max_bytes`: PathTooLarge."""
        try:
            created = self.api.create_container(
                image,
                command=["/proctor-never-started"],
                entrypoint=[],
                labels={
                    MANAGED_LABEL: "1",
                    WORKER_LABEL: self.worker,
                    HOST_LABEL: self.host,
                    DEPLOYMENT_LABEL: self.deployment,
                },
                network_disabled=True,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create a reader of {image}") from exc
        container_id = str(created["Id"])
        try:
            stream, _ = self.api.get_archive(container_id, path)
            written = 0
            for chunk in stream:
                written += len(chunk)
                if written > max_bytes:
                    raise PathTooLarge(f"{path} in {image} is over {max_bytes >> 20} MiB")
                into.write(chunk)
            return True
        except NotFound:
            return False
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"read {path} out of {image}") from exc
        finally:
            self._remove_container(container_id)

    def image_info(self, image: str) -> dict[str, Any] | None:
        """The engine's inspect of a local image; None when it is not on this host."""
        try:
            return dict(self.api.inspect_image(image))
        except ImageNotFound:
            return None
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect image {image}") from exc

    def _image_config(self, image: str) -> dict[str, Any] | None:
        """The image's `Config` (kept: a name's content changes only by a pull, which
        forgets it); None when the engine does not have the image (create says so)."""
        with self._lock:
            if image in self._configs:
                return self._configs[image]
        info = self.image_info(image)
        config = dict(info.get("Config") or {}) if info else None
        if config is not None:
            with self._lock:
                self._configs[image] = config
        return config

    def pull(self, image: str, *, timeout_s: float) -> None:
        """Pull a task image with the engine's client auth config (~/.docker/config.json),
        waiting at most `timeout_s`. docker-py's own `pull` waits forever (no read timeout),
        so the request is made here with one; a pull cut short is dropped by the engine
        when its request's connection closes."""
        repository, tag = docker.utils.parse_repository_tag(image)
        registry, _ = docker.auth.resolve_repository_name(repository)
        headers = {}
        header = docker.auth.get_config_header(self.api, registry)
        if header:
            headers["X-Registry-Auth"] = header
        params = {"fromImage": repository, "tag": tag or "latest"}
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                response = self.api._post(
                    self.api._url("/images/create"),
                    params=params,
                    headers=headers,
                    stream=True,
                    timeout=timeout_s,
                )
                self.api._raise_for_status(response)
                for message in self.api._stream_helper(response, decode=True):
                    if isinstance(message, dict) and message.get("error"):
                        raise APIError(str(message["error"]))
                outcome.append(None)
            except BaseException as exc:  # handed to the waiting thread
                outcome.append(exc)

        thread = threading.Thread(target=run, name=f"pull {image}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        with self._lock:
            self._digests.pop(image, None)
            self._configs.pop(image, None)
        if not outcome:
            raise PullFailed(f"pull {image}: no answer within {timeout_s:g} s")
        exc = outcome[0]
        if exc is None:
            return
        if isinstance(exc, APIError) and _not_in_registry(exc):
            why = exc.explanation or exc
            raise ImageNotInRegistry(f"the registry has no image {image}: {why}") from exc
        if isinstance(exc, requests.exceptions.Timeout):
            raise PullFailed(f"pull {image}: no answer within {timeout_s:g} s") from exc
        if isinstance(exc, DockerException | requests.exceptions.RequestException):
            wrapped = _wrap(exc, f"pull {image}")
            raise PullFailed(str(wrapped)) from exc
        raise exc

    def remove_image(self, image: str) -> bool:
        """Untag (and so free, if it was the last name) a local image; False when a
        container still uses it or it is gone already."""
        try:
            self.api.remove_image(image, force=False, noprune=False)
        except ImageNotFound:
            return False
        except APIError as exc:
            if exc.status_code == 409:  # a container uses it
                return False
            raise _wrap(exc, f"remove image {image}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"remove image {image}") from exc
        with self._lock:
            self._digests.pop(image, None)
            self._configs.pop(image, None)
        return True

    def images_in_use(self) -> set[str]:
        """The image ids of every container on this engine, running or not."""
        try:
            return {str(c["ImageID"]) for c in self.api.containers(all=True)}
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list containers") from exc

    # ------------------------------------------------------------------ containers

    def create(
        self,
        spec: SandboxSpec,
        *,
        name: str,
        labels: dict[str, str] | None = None,
        main: list[str] | None = None,
    ) -> Container:
        """Create and start a locked-down sandbox container. Its main process is an idle
        keeper, or `main` (a server's: root, its stdin kept open for `attach_main`)."""
        try:
            return self._create(spec, name=name, labels=labels, main=main, reuse=True)
        except NetworkGone:  # a spare network another worker pruned meanwhile: make one
            return self._create(spec, name=name, labels=labels, main=main, reuse=False)

    def _create(
        self,
        spec: SandboxSpec,
        *,
        name: str,
        labels: dict[str, str] | None,
        main: list[str] | None,
        reuse: bool,
    ) -> Container:
        started = time.monotonic()
        # a served sandbox's directories are root's until its server hands them to an episode
        uid, _, gid = ("0:0" if spec.served else spec.user).partition(":")
        memory_mb = spec.memory_mb + (POOLED_SERVER_MB if spec.served else 0)
        # exec: agents run scripts and compiled programs from their workspace
        tmpfs_opts = f"rw,exec,nosuid,nodev,size={spec.disk_mb}m"
        mounted = (*OWN_MOUNTS, spec.cover) if spec.cover else OWN_MOUNTS
        image = untrusted.overrides(self._image_config(spec.image), ours=mounted)
        holder, own_network, reused = None, "", False
        if self._joins_holder(spec):
            holder, reused = self._take_holder(spec, name, reuse=reuse)
            network, dns = f"container:{holder.id}", None
        else:
            network, dns, own_network, reused = self._sandbox_network(spec, name, reuse=reuse)
        host_config = self.api.create_host_config(
            network_mode=network,
            dns=dns,
            read_only=True,
            cap_drop=["ALL"],
            cap_add=list(POOLED_CAPS) if spec.served else None,
            security_opt=["no-new-privileges"],
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",  # equal: no swap
            nano_cpus=int(spec.cpus * 1e9),
            pids_limit=spec.pids,
            # an init that reaps zombies, so they never eat the pids limit; a server is its
            # own (it reaps what its episodes leave), and one process fewer to start
            init=main is None,
            runtime=spec.runtime,
            oom_score_adj=500,  # under host memory pressure, sandboxes go first
            tmpfs={
                WORKSPACE: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                SANDBOX_HOME: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                "/tmp": f"{tmpfs_opts},mode=1777",
                # SandboxFusion's image has a world-writable /mnt its tests write to
                "/mnt": f"{tmpfs_opts},mode=1777",
                **(
                    {spec.cover: f"rw,nosuid,nodev,size=16m,uid={uid},gid={gid or uid},mode=0755"}
                    if spec.cover
                    else {}
                ),
                **image.tmpfs,
            },
            ulimits=[docker.types.Ulimit(name="nofile", soft=1024, hard=1024)],
            log_config=docker.types.LogConfig(type="none"),
        )
        host_config["ReadonlyPaths"] = list(READ_ONLY_PATHS)  # docker-py has no argument
        all_labels = {
            MANAGED_LABEL: "1",
            WORKER_LABEL: self.worker,
            HOST_LABEL: self.host,
            DEPLOYMENT_LABEL: self.deployment,
            **(labels or {}),
        }
        argv = main or ["sleep", "infinity"]
        try:
            created = self.api.create_container(
                spec.image,
                # the entrypoint, not the command: an image's own entrypoint never runs
                entrypoint=argv[:1],
                command=argv[1:],
                healthcheck=untrusted.NO_HEALTHCHECK,
                # The idle keeper runs as root without capabilities, so the sandbox user
                # (who runs every exec) cannot kill it and take the container down with
                # `kill -1`; nothing of the code under test ever runs as root.
                user="0:0",
                stdin_open=main is not None,
                name=name,
                hostname=None if holder else "sandbox",  # a holder's: it has the holder's
                working_dir=WORKSPACE,
                labels={**image.labels, **all_labels},
                environment={
                    **image.environment,
                    "HOME": SANDBOX_HOME,
                    "LANG": "C.UTF-8",
                    "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONUNBUFFERED": "1",
                },
                host_config=host_config,
                network_disabled=spec.network == "none" and holder is None,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            if holder:
                self._remove_holder(holder)
            if own_network:
                self._forget_network(own_network)
                self._remove_sandbox_network(own_network)
            if reused and isinstance(exc, NotFound):  # the spare went meanwhile
                raise NetworkGone(holder.name if holder else own_network) from exc
            raise _wrap(exc, f"create sandbox from {spec.image}") from exc
        container_id = str(created["Id"])
        with self._lock:
            if holder:
                self._holder_of[container_id] = holder
            if own_network:
                self._own_networks[container_id] = own_network
        try:
            self.api.start(container_id)
        except (DockerException, requests.exceptions.RequestException) as exc:
            if holder:  # it goes with this sandbox, which may have failed because of it
                self._forget_holder(container_id)
                self._remove_container(container_id)
                self._remove_holder(holder)
                if reused and isinstance(exc, APIError):  # a spare holder gone or stopped
                    raise NetworkGone(holder.name) from exc
                raise _wrap(exc, f"start sandbox {name}") from exc
            if reused and isinstance(exc, NotFound):  # its network went meanwhile
                self._forget_network(own_network)
                self.remove(container_id)
                raise NetworkGone(own_network) from exc
            self.remove(container_id)
            raise _wrap(exc, f"start sandbox {name}") from exc
        ip = holder.ip if holder else None
        if spec.network != "none" and holder is None:
            networks = self.inspect(container_id)["NetworkSettings"]["Networks"]
            ip = (networks.get(network) or {}).get("IPAddress") or None
        return Container(
            id=container_id, name=name, spec=spec, start_s=time.monotonic() - started, ip=ip
        )

    def remove(self, container_id: str) -> None:
        with self._lock:
            holder = self._holder_of.pop(container_id, None)
            own_network = self._own_networks.pop(container_id, "")
        foreign_holder, own_networks = "", [own_network] if own_network else []
        if holder is None and not own_network:  # made by another process (swept)
            foreign_holder, own_networks = self._leftovers_of(container_id)
        self._remove_container(container_id)
        if holder is not None and not self._keep_spare_holder(holder):
            self._remove_holder(holder)
        if foreign_holder:
            self.remove(foreign_holder)  # a holder's own network is found by its label
        for network in own_networks:
            if not self._keep_spare(network):
                self._remove_sandbox_network(network)

    def _remove_container(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                log.warning("could not remove container %s: %s", container_id[:12], exc)
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not remove container %s: %s", container_id[:12], exc)

    def network_owner(self, container_id: str) -> dict[str, Any]:
        """The engine's inspect of the container whose network namespace a sandbox uses: its
        network holder's where it joined one, else its own (`HostConfig.NetworkMode`,
        `NetworkSettings.Networks`)."""
        info = self.inspect(container_id)
        mode = str(info["HostConfig"].get("NetworkMode") or "")
        if mode.startswith("container:"):
            return self.network_owner(mode.partition(":")[2])
        return info

    def _leftovers_of(self, container_id: str) -> tuple[str, list[str]]:
        """What goes with a sandbox this process did not make: the holder it joined (a
        network holder's id, or ""), and its own networks (found by their label)."""
        try:
            info = self.api.inspect_container(container_id)
        except NotFound:
            return "", []
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not inspect %s: %s", container_id[:12], exc)
            return "", []
        mode = str((info.get("HostConfig") or {}).get("NetworkMode") or "")
        if mode.startswith("container:"):
            joined = mode.partition(":")[2]
            with self._lock:  # one of ours serves another of our sandboxes by now
                ours = {h.id for h in self._holder_of.values()}
                ours |= {h.id for spare in self._spare_holders.values() for h in spare}
            if joined not in ours and self._is_holder(joined):
                return joined, []
            return "", []
        with self._lock:
            ours_networks = set(self._network_of)  # its network may serve one of ours by now
        name = str(info["Name"]).lstrip("/")
        return "", [n for n in self._networks_labelled(name) if n not in ours_networks]

    def _is_holder(self, container_id: str) -> bool:
        try:
            labels = self.api.inspect_container(container_id)["Config"].get("Labels") or {}
        except (DockerException, requests.exceptions.RequestException):
            return False
        return labels.get(HOLDER_LABEL) == "1" and labels.get(DEPLOYMENT_LABEL) == self.deployment

    def _keep_spare(self, network: str) -> bool:
        """Keep a removed sandbox's own network for the next one, if few are kept yet."""
        with self._lock:
            shared = self._network_of.get(network, ("", ""))[0]
            spare = self._spare_networks.setdefault(shared, [])
            if not shared or self._closed or len(spare) >= SPARE_NETWORKS:
                self._network_of.pop(network, None)
                return False
            spare.append(network)
            return True

    def _forget_network(self, network: str) -> None:
        with self._lock:
            self._network_of.pop(network, None)

    def release_networks(self) -> None:
        """Remove the spare network holders and sandbox networks (at a worker's stop)."""
        with self._lock:
            self._closed = True
            spare = [n for networks in self._spare_networks.values() for n in networks]
            self._spare_networks.clear()
            holders = [h for spares in self._spare_holders.values() for h in spares]
            self._spare_holders.clear()
        for holder in holders:
            self._remove_holder(holder)
        for network in spare:
            self._forget_network(network)
            self._remove_sandbox_network(network)

    # ------------------------------------------------------------------ network holders

    def _joins_holder(self, spec: SandboxSpec) -> bool:
        """Whether a sandbox joins a network holder: a fresh sandbox of a runtime that takes
        the namespace's interfaces, asking for no network or for one the honeypot isolates
        (a shared network alone would put every sandbox of a holder's life on it at once)."""
        if spec.pooled or spec.runtime not in HOLDER_RUNTIMES:
            return False  # a pooled sandbox lives long: a namespace of its own costs it once
        with self._lock:
            return spec.network == "none" or spec.network in self._isolation

    def _take_holder(self, spec: SandboxSpec, name: str, *, reuse: bool) -> tuple[Holder, bool]:
        """A spare holder for the network the sandbox asks for, or a new one; whether it
        served a sandbox before."""
        with self._lock:
            spare = self._spare_holders.get(spec.network)
            if spare and reuse:
                return spare.pop(), True
        for attempt in range(HOLDER_TRIES):
            try:
                suffix = f"-{attempt + 1}" if attempt else ""
                return self._make_holder(spec, f"{name}{suffix}-netns"), False
            except ImageMissing:
                raise
            except SandboxError as exc:  # the engine refused a start now and then
                if attempt + 1 == HOLDER_TRIES:
                    raise
                log.warning("a network holder for %s did not start (%s): once more", name, exc)
        raise AssertionError("unreachable")

    def _make_holder(self, spec: SandboxSpec, name: str) -> Holder:
        own_network, dns = "", None
        mode = spec.network
        if spec.network != "none":
            with self._lock:
                isolation = self._isolation[spec.network]
            own_network, peer_ip = self._create_sandbox_network(
                f"{name}-net", isolation, sandbox=name
            )
            with self._lock:
                self._network_of[own_network] = (spec.network, peer_ip)
            mode, dns = own_network, [peer_ip]
        host_config = self.api.create_host_config(
            network_mode=mode,
            dns=dns,
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{HOLDER_MEMORY_MB}m",
            memswap_limit=f"{HOLDER_MEMORY_MB}m",
            pids_limit=HOLDER_PIDS,
            runtime=spec.runtime,
            log_config=docker.types.LogConfig(type="none"),
        )
        labels = {
            MANAGED_LABEL: "1",
            HOLDER_LABEL: "1",
            WORKER_LABEL: self.worker,
            HOST_LABEL: self.host,
            DEPLOYMENT_LABEL: self.deployment,
        }
        holder_id, ip = "", None
        try:
            created = self.api.create_container(
                self.holder_image or spec.image,
                entrypoint=["sleep"],
                command=["infinity"],
                user="0:0",  # out of reach of the sandbox user, in a pid namespace of its own
                name=name,
                hostname="sandbox",
                labels=labels,
                host_config=host_config,
                network_disabled=spec.network == "none",
            )
            holder_id = str(created["Id"])
            self.api.start(holder_id)
            if own_network:
                networks = self.inspect(holder_id)["NetworkSettings"]["Networks"]
                ip = (networks.get(own_network) or {}).get("IPAddress") or None
        except (DockerException, requests.exceptions.RequestException, SandboxError) as exc:
            self._remove_holder(Holder(holder_id, name, spec.network, own_network, None))
            raise _wrap(exc, f"make a network holder from {spec.image}") from exc
        return Holder(holder_id, name, spec.network, own_network, ip)

    def _keep_spare_holder(self, holder: Holder) -> bool:
        """Keep a removed sandbox's holder for the next one, if few are kept yet."""
        with self._lock:
            spare = self._spare_holders.setdefault(holder.network, [])
            if self._closed or len(spare) >= SPARE_NETWORKS:
                return False
            spare.append(holder)
            return True

    def _forget_holder(self, container_id: str) -> None:
        with self._lock:
            self._holder_of.pop(container_id, None)

    def _remove_holder(self, holder: Holder) -> None:
        """Remove a holder (no sandbox in it any more), then its own network."""
        if holder.id:
            self._remove_container(holder.id)
        if holder.own_network:
            self._forget_network(holder.own_network)
            self._remove_sandbox_network(holder.own_network)

    def inspect(self, container_id: str) -> dict[str, Any]:
        try:
            return dict(self.api.inspect_container(container_id))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect {container_id[:12]}") from exc

    def stopped_at(self, container_id: str) -> float | None:
        """When a stopped container stopped (seconds since the epoch); None when that is not
        known (gone, or never started: Go's zero time)."""
        try:
            finished = _timestamp(str(self.inspect(container_id)["State"].get("FinishedAt", "")))
        except SandboxError:
            return None
        return finished if finished is not None and finished > 0 else None

    def oom_killed(self, container_id: str) -> bool:
        try:
            return bool(self.inspect(container_id)["State"].get("OOMKilled"))
        except SandboxError:
            return False

    def usage(self, container_id: str) -> Usage:
        """State and resource use, as evidence of what broke a sandbox's runner.

        A sandbox can stop between the inspect and the stats read (its init taken by the
        OOM killer of a full memory cgroup): the engine then answers the stats with an empty
        body. That is the sandbox's end, not the engine's failure: it is read again, and
        only a running sandbox whose stats cannot be read twice is our error."""
        for attempt in range(STATS_TRIES):
            state = self.inspect(container_id)["State"]
            running, oom = bool(state.get("Running")), bool(state.get("OOMKilled"))
            if not running:
                return Usage(running=False, oom_killed=oom, exit_code=state.get("ExitCode"))
            try:
                stats = self.api.stats(container_id, stream=False, one_shot=True)
                break
            except (DockerException, requests.exceptions.RequestException) as exc:
                if attempt + 1 == STATS_TRIES:
                    raise _wrap(exc, f"read the stats of {container_id[:12]}") from exc
        pids = stats.get("pids_stats") or {}
        memory = stats.get("memory_stats") or {}
        detail = memory.get("stats") or {}
        used = memory.get("usage")
        if used is not None:  # the page cache the kernel can drop is not pressure
            used -= int(detail.get("total_inactive_file", detail.get("inactive_file", 0)))
        return Usage(
            running=True,
            oom_killed=oom,
            pids=pids.get("current"),
            pids_limit=pids.get("limit"),
            memory=used,
            memory_limit=memory.get("limit"),
            memory_hits=memory.get("failcnt"),
        )

    def oom_kills(self, container_id: str) -> int | None:
        """How many processes the kernel's OOM killer ended in a running container, read
        from the host's side of its memory cgroup — no exec, which a full cgroup may not
        let start. None where those files are not to be seen (a worker in a container)."""
        for template in MEMORY_CGROUPS:
            try:
                with open(template.format(id=container_id)) as handle:
                    return oom_kill_count(handle.read())
            except OSError:
                continue
        return None

    def set_memory(self, container_id: str, memory_mb: int) -> None:
        """Change a running sandbox's memory limit (swap stays off: memory+swap = memory)."""
        try:
            self.api.update_container(
                container_id, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m"
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"set the memory limit of {container_id[:12]}") from exc

    def managed_containers(
        self, *, any_deployment: bool = False, **labels: str
    ) -> list[dict[str, Any]]:
        if not any_deployment:
            labels = {DEPLOYMENT_LABEL: self.deployment, **labels}
        filters = [f"{MANAGED_LABEL}=1"] + [f"{k}={v}" for k, v in labels.items()]
        try:
            return list(self.api.containers(all=True, filters={"label": filters}))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list sandboxes") from exc

    # ------------------------------------------------------------------ networks, services

    def ensure_internal_network(self, name: str, *, peer: str | None = None) -> str:
        """The shared internal network (no route out, no traffic between its members) under
        its deterministic name; returns its id, which callers use from then on.

        Docker's duplicate check races, so workers starting together can each make one. All
        of them converge on the oldest of the name and remove the others (Docker refuses to
        remove one in use, so only an unused duplicate goes); the id is never ambiguous. One
        made by an older version, with traffic between members on, is recreated when nothing
        but `peer` is on it.
        """
        for _ in range(4):
            found = self._networks_named(name)
            if not found:
                self._create_internal_network(name)
                found = self._networks_named(name)
            if not found:
                continue  # removed between our create and our look: once more
            winner, *losers = sorted(found, key=_age)
            for loser in losers:
                self._remove_network_quietly(str(loser["Id"]), peer=peer)
            if (winner.get("Options") or {}).get(ICC_OPTION) == "false":
                return str(winner["Id"])
            if not self._recreate_with_icc_off(str(winner["Id"]), name, peer):
                return str(winner["Id"])
        raise SandboxError(f"the network {name} disappears as soon as it is made")

    def _create_internal_network(self, name: str) -> None:
        try:
            self.api.create_network(
                name,
                driver="bridge",
                internal=True,
                check_duplicate=True,
                options={ICC_OPTION: "false"},
                labels={MANAGED_LABEL: "1", DEPLOYMENT_LABEL: self.deployment},
            )
        except APIError as exc:
            if exc.status_code != 409:  # 409: it exists already, which is what we want
                raise _wrap(exc, f"create network {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create network {name}") from exc

    def _recreate_with_icc_off(self, network_id: str, name: str, peer: str | None) -> bool:
        """Drop an older version's network (members could talk to each other) if only `peer`
        is on it; False when others still are (they keep it; our sandboxes never join it)."""
        try:
            members = self._members(network_id)
            names = set(members.values())
            if names - {peer}:
                log.warning(
                    "network %s lets its members talk to each other and %d containers "
                    "of an older version are on it: left as it is",
                    name,
                    len(names),
                )
                return False
            log.info("recreating network %s with traffic between its members off", name)
            self._disconnect_all(network_id, members)
            self.api.remove_network(network_id)
        except NotFound:
            pass  # another worker is migrating it too
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"recreate network {name}") from exc
        return True

    def _members(self, network_id: str) -> dict[str, str]:
        """The containers on a network: id → name."""
        members = self.api.inspect_network(network_id).get("Containers") or {}
        return {str(cid): str(m.get("Name", "")) for cid, m in members.items()}

    def _disconnect_all(self, network_id: str, members: Iterable[str]) -> None:
        for member in members:
            self.api.disconnect_container_from_network(member, network_id, force=True)

    def _networks_named(self, name: str) -> list[dict[str, Any]]:
        try:
            listed = self.api.networks(names=[name])
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"list networks named {name}") from exc
        return [dict(n) for n in listed if n.get("Name") == name]

    def _remove_network_quietly(self, network_id: str, *, peer: str | None = None) -> None:
        """Remove a network nobody uses but `peer` (a worker that settled on it for a moment
        put it there; it is taken off first); one in use stays (Docker refuses, we log it)."""
        try:
            if peer is not None:
                members = self._members(network_id)
                if set(members.values()) == {peer}:
                    self._disconnect_all(network_id, members)
            self.api.remove_network(network_id)
        except NotFound:
            pass
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.info("left network %s in place: %s", network_id[:12], exc)

    def isolate(self, network: str, *, peer: str, subnets: str) -> None:
        """From now on a sandbox asking for `network` gets a network of its own instead, with
        `peer` its only other member; the subnets come from `subnets`."""
        try:
            pool = ipaddress.IPv4Network(subnets)
        except ValueError as exc:
            raise SandboxError(f"sandbox subnets {subnets!r}: {exc}") from exc
        if pool.prefixlen > SANDBOX_PREFIX:
            raise SandboxError(f"sandbox subnets {subnets}: smaller than one /{SANDBOX_PREFIX}")
        with self._lock:
            self._isolation[network] = Isolation(peer=peer, subnets=pool)

    def _sandbox_network(
        self, spec: SandboxSpec, name: str, *, reuse: bool
    ) -> tuple[str, list[str] | None, str, bool]:
        """Network mode and DNS servers for a new sandbox, its own network if it has one, and
        whether that network served a sandbox before (one at a time, never two at once)."""
        if spec.network == "none":
            return "none", None, "", False
        with self._lock:
            isolation = self._isolation.get(spec.network)
            spare = self._spare_networks.get(spec.network)
            reused = spare.pop() if spare and reuse else None
            peer_ip = self._network_of[reused][1] if reused else ""
        if isolation is None:  # the shared network alone: its members cannot reach each other
            return spec.network, list(spec.dns) or None, "", False
        if reused:
            return reused, [peer_ip], reused, True
        network, peer_ip = self._create_sandbox_network(f"{name}-net", isolation, sandbox=name)
        with self._lock:
            self._network_of[network] = (spec.network, peer_ip)
        return network, [peer_ip], network, False

    def _create_sandbox_network(
        self, name: str, isolation: Isolation, *, sandbox: str
    ) -> tuple[str, str]:
        """A /29 of its own with the peer on it; its name and the peer's address.

        The sandbox's default route is the network's gateway, an address nobody on the host
        owns (no host address on the bridge) and the peer answers for, so a packet to any
        address reaches the peer and nothing else. Not Docker-`internal`: that drops, on the
        host, every frame whose destination is outside the subnet — the very packets the
        peer must see (a raw IP). Nothing can leave either way: the host owns no address
        here to route through, masquerading is off, and the peer forwards nothing.
        """
        labels = {
            MANAGED_LABEL: "1",
            DEPLOYMENT_LABEL: self.deployment,
            SANDBOX_NETWORK_LABEL: sandbox,
        }
        for _ in range(SUBNET_TRIES):
            subnet = _random_subnet(isolation.subnets)
            gateway, peer_ip = (str(host) for host in list(subnet.hosts())[:2])
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=gateway)]
            )
            try:
                self.api.create_network(
                    name,
                    driver="bridge",
                    internal=False,
                    ipam=ipam,
                    labels=labels,
                    check_duplicate=True,
                    options={NO_HOST_ADDRESS_OPTION: "true", NO_MASQUERADE_OPTION: "false"},
                )
            except APIError as exc:
                if exc.status_code == 403 and "overlap" in str(exc.explanation):
                    continue  # another sandbox has this subnet: draw again
                raise _wrap(exc, f"create network {name}") from exc
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise _wrap(exc, f"create network {name}") from exc
            try:
                self.api.connect_container_to_network(isolation.peer, name, ipv4_address=peer_ip)
            except (DockerException, requests.exceptions.RequestException) as exc:
                self._remove_sandbox_network(name)
                raise _wrap(exc, f"connect {isolation.peer} to {name}") from exc
            return name, peer_ip
        raise SandboxError(
            f"no free /{SANDBOX_PREFIX} in {isolation.subnets} after {SUBNET_TRIES} draws"
        )

    def _remove_sandbox_network(self, network: str, *, peers: set[str] | None = None) -> None:
        """Disconnect whatever is left on a sandbox's own network (its peer; with `peers`,
        those only: a sandbox that joined meanwhile keeps it), then remove it.

        The engine may still be releasing the sandbox's endpoint a moment after the removal
        of the container returned ("active endpoints"): then look again, a few times.
        """
        for attempt in range(4):
            try:
                members = self.api.inspect_network(network).get("Containers") or {}
                for member, about in members.items():
                    if peers is not None and about.get("Name") not in peers:
                        continue
                    # gone already, or the engine no longer counts it connected: either
                    # way removing the network is what is left to do
                    with suppress(NotFound, APIError):
                        self.api.disconnect_container_from_network(member, network, force=True)
                self.api.remove_network(network)
                return
            except NotFound:
                return
            except APIError as exc:
                if exc.status_code != 403 or attempt == 3:
                    log.warning("could not remove sandbox network %s: %s", network, exc)
                    return
                time.sleep(0.1 * (attempt + 1))
            except (DockerException, requests.exceptions.RequestException) as exc:
                log.warning("could not remove sandbox network %s: %s", network, exc)
                return

    def _networks_labelled(self, sandbox: str) -> list[str]:
        """The own networks of a sandbox or holder, by its name (their label)."""
        try:
            listed = self.api.networks(filters={"label": f"{SANDBOX_NETWORK_LABEL}={sandbox}"})
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not find the networks of %s: %s", sandbox, exc)
            return []
        return [str(n["Name"]) for n in listed]

    def prune_sandbox_networks(self) -> int:
        """Remove this deployment's sandbox networks that no sandbox is on (a worker killed
        between making one and removing it, or the spares of a worker that stopped); how
        many went. A live worker's spare may go too: it makes another when it finds it gone."""
        try:
            listed = self.api.networks(
                filters={"label": [SANDBOX_NETWORK_LABEL, f"{DEPLOYMENT_LABEL}={self.deployment}"]}
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list sandbox networks") from exc
        with self._lock:
            peers = {isolation.peer for isolation in self._isolation.values()}
            mine = set(self._network_of)
        removed = 0
        for network in listed:
            if time.time() - _age(network)[0] < NETWORK_PRUNE_AGE_S:
                continue  # its sandbox may be being made right now
            if network.get("Name") in mine:
                continue
            try:
                members = self.api.inspect_network(network["Id"]).get("Containers") or {}
            except NotFound:
                continue
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise _wrap(exc, f"inspect network {network.get('Name')}") from exc
            if any(m.get("Name") not in peers for m in members.values()):
                continue  # a sandbox is on it
            self._remove_sandbox_network(str(network["Id"]), peers=peers)
            removed += 1
        return removed

    def remove_deployment(self, services: Iterable[str] = ()) -> int:
        """Remove this deployment's containers on this engine, the named `services` (its
        honeypot), then its networks no other container is on: at its last worker's stop.
        How many containers went."""
        containers = [str(c["Id"]) for c in self.managed_containers()]
        for container in [*containers, *services]:
            self._remove_container(container)
        try:
            listed = self.api.networks(filters={"label": f"{DEPLOYMENT_LABEL}={self.deployment}"})
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, "list networks") from exc
        for network in listed:
            # another deployment's honeypot on a network ours made keeps it
            with suppress(NotFound, APIError, DockerException):
                if not self.api.inspect_network(network["Id"]).get("Containers"):
                    self.api.remove_network(network["Id"])
        return len(containers)

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
        cap_add: list[str] | None = None,
    ) -> dict[str, Any]:
        """A long-running helper container (the honeypot), one per engine, running and on
        `network` (an id); its inspect. `cap_add`: the only capabilities it gets (in its own
        namespaces: the honeypot sets up its own routing with them, then drops them).

        Many workers may call this at once: a name conflict means another made it, so we
        use theirs; one that is not running is started, never removed (it may be another
        worker's, made a moment ago); only one made from another image or other labels (an
        older version) is replaced.
        """
        deadline = time.monotonic() + SERVICE_START_S
        while True:
            info = self._inspect_service(name)
            if info is not None and not _same_service(info, image, labels):
                log.info("replacing %s: made from another image or version", name)
                with suppress(NotFound):  # gone already: done
                    self.api.remove_container(name, force=True)
                info = None
            if info is None:
                self._create_service(
                    name,
                    image=image,
                    command=command,
                    network=network,
                    user=user,
                    sysctls=sysctls,
                    labels=labels,
                    cap_add=cap_add,
                )
            problem = ""
            try:
                self.api.start(name)  # a no-op when it runs already
            except NotFound as exc:
                # gone, or made on a network that lost the race since: one that never ran
                # is nobody's yet, so it can go and be made again
                problem = str(exc)
                info = self._inspect_service(name)
                if info is not None and info["State"].get("Status") == "created":
                    with suppress(NotFound):
                        self.api.remove_container(name, force=True)
            except (DockerException, requests.exceptions.RequestException) as exc:
                problem = str(exc)  # restarting meanwhile, say: look again
            info = self._inspect_service(name)
            if info is not None and info["State"].get("Running"):
                self._join(name, network, info)
                return self._inspect_service(name) or info
            if time.monotonic() > deadline:
                state = info["State"] if info else "gone"
                raise SandboxError(f"{name} does not stay running ({state}) {problem}".strip())
            time.sleep(0.2)

    def _inspect_service(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.api.inspect_container(name))
        except NotFound:
            return None
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"inspect {name}") from exc

    def _create_service(
        self,
        name: str,
        *,
        image: str,
        command: list[str],
        network: str,
        user: str,
        sysctls: dict[str, str],
        labels: dict[str, str],
        cap_add: list[str] | None = None,
    ) -> None:
        host_config = self.api.create_host_config(
            network_mode=network,
            read_only=True,
            cap_drop=["ALL"],
            cap_add=cap_add or None,
            security_opt=["no-new-privileges"],
            sysctls=sysctls,
            mem_limit="128m",
            pids_limit=256,
            restart_policy={"Name": "unless-stopped"},
            ulimits=[docker.types.Ulimit(name="nofile", soft=4096, hard=4096)],
            log_config=docker.types.LogConfig(
                type="json-file", config={"max-size": "20m", "max-file": "3"}
            ),
        )
        try:
            self.api.create_container(
                image,
                command=command,
                name=name,
                user=user,
                labels={MANAGED_LABEL: "1", **labels},
                host_config=host_config,
            )
        except APIError as exc:
            if exc.status_code != 409:  # 409: another worker made it first, use theirs
                raise _wrap(exc, f"create {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"create {name}") from exc

    def _join(self, name: str, network_id: str, info: dict[str, Any]) -> None:
        """Put a running service on the network if it is not (the network was recreated).

        If it is on another network of the same name, the older of the two wins, as in
        `ensure_internal_network`: an older one stays (the caller finds the service not on
        its network and looks again), a newer one is left and removed.
        """
        joined = info["NetworkSettings"].get("Networks") or {}
        if any(n.get("NetworkID") == network_id for n in joined.values()):
            return
        try:
            wanted = dict(self.api.inspect_network(network_id))
            other = (joined.get(str(wanted["Name"])) or {}).get("NetworkID")
            if other:
                try:
                    if _age(dict(self.api.inspect_network(other))) < _age(wanted):
                        return
                except NotFound:
                    pass
                with suppress(NotFound):  # gone already: done
                    self.api.disconnect_container_from_network(name, other, force=True)
                self._remove_network_quietly(str(other))
            self.api.connect_container_to_network(name, network_id)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"connect {name} to {network_id[:12]}") from exc

    def logs(self, name: str, *, since: float, until: float) -> str:
        try:
            raw = self.api.logs(
                name,
                stdout=True,
                stderr=False,
                since=int(since),
                until=int(until) + 1,
                timestamps=False,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _wrap(exc, f"read the log of {name}") from exc
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)

    # ------------------------------------------------------------------ exec

    def attach_main(self, container_id: str) -> Attached:
        """The container's main process's stdin and output (Docker's stdout/stderr frames),
        over one socket. Closing it ends that stdin."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        try:
            raw = self.api.attach_socket(container_id, params=params)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise _exec_failed(exc, container_id) from exc
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
            raise _exec_failed(exc, container_id) from exc
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
                raise _wrap(exc, "inspect an exec") from exc
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.01)
        return None


def _timestamp(raw: str) -> float | None:
    """An engine's time (RFC 3339, as Go writes it) in seconds since the epoch."""
    head, dot, rest = raw.partition(".")
    if dot:  # Go writes up to 9 fraction digits, Python reads 6
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        raw = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _age(network: dict[str, Any]) -> tuple[float, str]:
    """When a network was made (seconds since the epoch), then its id: a total order."""
    created = _timestamp(str(network.get("Created", "")))
    return float("inf") if created is None else created, str(network.get("Id", ""))


def _random_subnet(pool: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
    count = 1 << (SANDBOX_PREFIX - pool.prefixlen)
    start = int(pool.network_address) + random.randrange(count) * (1 << (32 - SANDBOX_PREFIX))
    return ipaddress.IPv4Network((start, SANDBOX_PREFIX))


def _same_service(info: dict[str, Any], image: str, labels: dict[str, str]) -> bool:
    config = info.get("Config") or {}
    have = config.get("Labels") or {}
    return config.get("Image") == image and all(have.get(k) == v for k, v in labels.items())


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
