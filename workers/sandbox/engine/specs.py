"""What a sandbox is asked for (`SandboxSpec`) and what the engine hands back: the
container, an exec's result, its resource use, a network holder, an attached socket."""

from __future__ import annotations

import ipaddress
import socket
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any


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
    # (`server_sandboxes.py`): a one-shot episode's program is a line to it, not a `docker exec`
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
