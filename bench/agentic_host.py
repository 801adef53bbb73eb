"""What bench/agentic.py reads of the host: CPU by component (the service's API and worker
processes, its Redis, the engine's daemons, the containers of one label, this process) and
memory (the containers' cgroups, the processes' proportional set size, Redis's own count,
the kernel's MemAvailable), and the label sweeps that leave nothing behind."""

from __future__ import annotations

import os
import subprocess
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import redis
from episode_cpu import client_cpu, daemon_cpu, machine_cpu
from harness import children, cpu_seconds

# cgroup v1 (cgroupfs driver), then v2 (cgroupfs, then systemd driver)
CPU_FILES = (
    "/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage",
    "/sys/fs/cgroup/docker/{id}/cpu.stat",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/cpu.stat",
)
MEMORY_DIRS = (
    "/sys/fs/cgroup/memory/docker/{id}",
    "/sys/fs/cgroup/docker/{id}",
    "/sys/fs/cgroup/system.slice/docker-{id}.scope",
)


def labelled(label: str, *, running_only: bool = False) -> list[str]:
    """Full ids of the containers carrying `label` (`key=value`)."""
    command = ["docker", "ps", "-q", "--no-trunc", "--filter", f"label={label}"]
    if not running_only:
        command.insert(2, "-a")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.stdout.split()


def container_cpu(container_id: str) -> float:
    """CPU seconds so far of one container's cgroup (0 when it is gone)."""
    for pattern in CPU_FILES:
        path = Path(pattern.format(id=container_id))
        with suppress(OSError):
            text = path.read_text()
            if path.name == "cpuacct.usage":
                return int(text) / 1e9
            for line in text.splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
    return 0.0


def container_memory(container_id: str) -> int:
    """Bytes one container holds, as `docker stats` counts them (usage less inactive file
    pages, which the kernel takes back when it needs them)."""
    for pattern in MEMORY_DIRS:
        root = Path(pattern.format(id=container_id))
        usage = root / "memory.usage_in_bytes"
        if not usage.exists():
            usage = root / "memory.current"
        with suppress(OSError):
            used = int(usage.read_text())
            stat = dict(
                line.split(" ", 1) for line in (root / "memory.stat").read_text().splitlines()
            )
            inactive = int(stat.get("total_inactive_file", stat.get("inactive_file", 0)))
            return max(used - inactive, 0)
    return 0


def containers_cpu(label: str) -> dict[str, float]:
    return {cid: container_cpu(cid) for cid in labelled(label)}


def pss(pid: int) -> int:
    """Proportional set size in bytes (forked workers share their pages: RSS counts them
    once per process)."""
    with suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass(frozen=True)
class Stack:
    """The processes of one private deployment: `proctor run` (the API) with its worker
    processes beneath it, and its own redis-server."""

    api_pid: int
    redis_pid: int
    redis_url: str
    label: str  # the deployment's container label, key=value

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far, by component."""
        workers = 0.0
        for child in children(self.api_pid):
            with suppress(OSError):
                workers += cpu_seconds(child)
        return {
            "api": cpu_seconds(self.api_pid),
            "workers (incl. screening)": workers,
            "redis": cpu_seconds(self.redis_pid),
            "engine (dockerd, containerd, shims)": sum(daemon_cpu().values()),
            "sandboxes": sum(containers_cpu(self.label).values()),
            "bench client": client_cpu(),
            "machine": machine_cpu(),
        }

    def memory(self) -> dict[str, int]:
        """Bytes held, by component: the processes' PSS, Redis's used memory, the
        deployment's containers; and the kernel's MemAvailable."""
        with redis.Redis.from_url(self.redis_url) as client:
            used = int(client.info("memory")["used_memory"])
        ids = labelled(self.label, running_only=True)
        return {
            "api + workers (PSS)": sum(pss(p) for p in [self.api_pid, *children(self.api_pid)]),
            "redis (used_memory)": used,
            "sandboxes (cgroups)": sum(container_memory(c) for c in ids),
            "containers": len(ids),
            "MemAvailable": mem_available(),
        }


def engine_cpu(label: str) -> dict[str, float]:
    """The bare baseline's CPU so far: the engine's daemons, its containers, this process,
    the machine."""
    return {
        "engine (dockerd, containerd, shims)": sum(daemon_cpu().values()),
        "sandboxes": sum(containers_cpu(label).values()),
        "bench client": client_cpu(),
        "machine": machine_cpu(),
    }


def per_unit(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    """Milliseconds of CPU per unit by component; `rest of the machine` is what the
    machine's busy time grew by beyond them (the engine's short-lived runtimes, the kernel,
    and on a shared host everyone else's work)."""
    if count <= 0:
        return {}
    ms = {part: (after[part] - before[part]) / count * 1000 for part in before if part != "machine"}
    busy = (after["machine"] - before["machine"]) / count * 1000
    ms["rest of the machine (others' load too)"] = max(busy - sum(ms.values()), 0.0)
    return ms


def sweep(label: str) -> int:
    """Remove every container and network carrying `label`; how many containers."""
    ids = labelled(label)
    for start in range(0, len(ids), 50):
        subprocess.run(["docker", "rm", "-f", *ids[start : start + 50]], capture_output=True)
    networks = subprocess.run(
        ["docker", "network", "ls", "-q", "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    for network in networks:
        # an engine overloaded while its containers went can keep their endpoints: a
        # network with one left cannot be removed until it is disconnected
        names = subprocess.run(
            ["docker", "network", "inspect", network, "--format",
             "{{range .Containers}}{{.Name}} {{end}}"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        for name in names:
            subprocess.run(
                ["docker", "network", "disconnect", "-f", network, name], capture_output=True
            )
        subprocess.run(["docker", "network", "rm", network], capture_output=True)
    return len(ids)


def cores() -> int:
    return os.cpu_count() or 1
