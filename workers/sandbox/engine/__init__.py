"""The typed wrapper around the Docker SDK: the only package that imports `docker`
(tests/unit/test_layers.py checks it).

One `Engine` per process, made of its parts:
    base.py        the client and the state the parts share; runtimes
    images.py      images: inspected, pulled (task images), read out of, removed
    networks.py    the shared internal network and each sandbox's own network
    holders.py     network holders: namespaces fresh sandboxes join one at a time
    containers.py  sandbox containers: made locked down, removed, inspected
    services.py    service containers (the honeypot) and the networks they join
    execs.py       execs over a raw socket, with stdin and a deadline
    engine.py      `Engine`, all of the above
and what they share: constants.py (labels, paths, limits), specs.py (what a sandbox is
asked for, what the engine answers), errors.py (the exception tree, drawn there).
"""

from __future__ import annotations

from workers.sandbox.engine.constants import (
    DEPLOYMENT_LABEL,
    HOLDER_LABEL,
    HOST_LABEL,
    ICC_OPTION,
    MANAGED_LABEL,
    POOL_LABEL,
    POOLED_SERVER_MB,
    SANDBOX_HOME,
    WORKER_LABEL,
    WORKSPACE,
)
from workers.sandbox.engine.containers import oom_kill_count
from workers.sandbox.engine.engine import Engine
from workers.sandbox.engine.errors import (
    ContainerStopped,
    DockerUnavailable,
    ExecStreamBroken,
    ImageMissing,
    ImageNotInRegistry,
    NetworkGone,
    NoCapacity,
    PathTooLarge,
    ProtectionMissing,
    PullFailed,
    SandboxError,
)
from workers.sandbox.engine.execs import FRAME_HEADER
from workers.sandbox.engine.specs import (
    Attached,
    Container,
    ExecResult,
    Holder,
    Isolation,
    SandboxSpec,
    Usage,
)

__all__ = [
    "DEPLOYMENT_LABEL",
    "FRAME_HEADER",
    "HOLDER_LABEL",
    "HOST_LABEL",
    "ICC_OPTION",
    "MANAGED_LABEL",
    "POOLED_SERVER_MB",
    "POOL_LABEL",
    "SANDBOX_HOME",
    "WORKER_LABEL",
    "WORKSPACE",
    "Attached",
    "Container",
    "ContainerStopped",
    "DockerUnavailable",
    "Engine",
    "ExecResult",
    "ExecStreamBroken",
    "Holder",
    "ImageMissing",
    "ImageNotInRegistry",
    "Isolation",
    "NetworkGone",
    "NoCapacity",
    "PathTooLarge",
    "ProtectionMissing",
    "PullFailed",
    "SandboxError",
    "SandboxSpec",
    "Usage",
    "oom_kill_count",
]
