"""The start-up check: a worker refuses to run episodes on an engine that would not
enforce the sandbox's protections, instead of silently running them unprotected."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from workers.sandbox.engine import (
    DockerUnavailable,
    Engine,
    ImageMissing,
    ProtectionMissing,
    SandboxError,
    SandboxSpec,
)

log = logging.getLogger(__name__)

# The runtime a deployment that names none gets where the engine has it and it works: crun
# starts and ends a container for about a third of runc's CPU (no Go runtime in the
# container's init nor in each of the five runtime calls of its life), which is most of
# what a fresh container per episode costs beyond the episode itself (docs/isolation.md).
FAST_RUNTIME = "crun"

PROBE = r"""
import os, socket, sys
problems = []
if os.getuid() == 0:
    problems.append("runs as root")
try:
    open("/proctor-probe", "w")
    problems.append("root filesystem is writable")
except OSError:
    pass
try:
    s = socket.create_connection(("1.1.1.1", 53), timeout=2)
    problems.append("network reachable")
except OSError:
    pass
try:
    open("/workspace/.probe", "w").write("x")
    os.unlink("/workspace/.probe")
except OSError as exc:
    problems.append("workspace not writable: %s" % exc)
with open("/proc/self/status") as f:
    caps = [l.split()[1] for l in f if l.startswith(("CapEff", "CapBnd"))]
if any(int(c, 16) for c in caps):
    problems.append("capabilities not dropped: %s" % caps)
print(";".join(problems))
"""


def verify_protections(engine: Engine, spec: SandboxSpec) -> None:
    """Start one sandbox the way episodes get them and check each protection holds."""
    container = engine.create(spec, name=f"proctor-probe-{uuid.uuid4().hex[:8]}")
    try:
        host = engine.inspect(container.id)["HostConfig"]
        problems = []
        if not host.get("ReadonlyRootfs"):
            problems.append("read-only root not applied")
        if "ALL" not in (host.get("CapDrop") or []):
            problems.append("capabilities not dropped")
        if not any("no-new-privileges" in o for o in host.get("SecurityOpt") or []):
            problems.append("no-new-privileges not applied")
        if not host.get("Memory") or host.get("MemorySwap") != host.get("Memory"):
            problems.append("memory limit without swap not applied")
        if not host.get("PidsLimit"):
            problems.append("pids limit not applied")
        network = engine.network_owner(container.id)["HostConfig"].get("NetworkMode")
        if spec.network == "none" and network != "none":
            problems.append("network not disabled")
        result = engine.exec(
            container.id, ["python3", "-I", "-c", PROBE], user=spec.user, timeout_s=30
        )
        if result.exit_code != 0:
            problems.append("probe failed: " + result.stderr.decode(errors="replace")[-300:])
        reported = result.stdout.decode(errors="replace").strip()
        if reported:
            problems += reported.split(";")
        if problems:
            raise ProtectionMissing(
                f"refusing to run sandboxes from {spec.image}: " + "; ".join(problems)
            )
        log.info("sandbox protections verified on %s (%s)", spec.image, spec.runtime or "runc")
    finally:
        engine.remove(container.id)


def pick_runtime(engine: Engine, spec: SandboxSpec) -> str | None:
    """The runtime for a deployment that named none, its protections verified: crun where
    the engine has it and it starts a sandbox with every protection, else the engine's
    default (None: runc), which must then pass the check itself."""
    if FAST_RUNTIME in engine.runtimes():
        try:
            verify_protections(engine, replace(spec, runtime=FAST_RUNTIME))
            return FAST_RUNTIME
        except (ImageMissing, DockerUnavailable):
            raise  # not crun's doing: the worker waits and asks again, crun included
        except SandboxError as exc:  # e.g. crun refuses a hybrid cgroup host
            log.warning(
                "%s cannot run sandboxes here (%s): using the engine's default", FAST_RUNTIME, exc
            )
    verify_protections(engine, spec)
    return None
