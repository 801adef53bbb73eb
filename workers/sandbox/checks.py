"""The start-up check: a worker refuses to run episodes on an engine that would not
enforce the sandbox's protections, instead of silently running them unprotected."""

from __future__ import annotations

import logging
import uuid

from workers.sandbox.docker import Engine, ProtectionMissing, SandboxSpec

log = logging.getLogger(__name__)

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
