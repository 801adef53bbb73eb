"""What the engine's sandboxes are made with: labels, paths, limits and tries."""

from __future__ import annotations

MANAGED_LABEL = "org.proctor.managed"

WORKER_LABEL = "org.proctor.worker"

HOST_LABEL = "org.proctor.host"

POOL_LABEL = "org.proctor.pool"

DEPLOYMENT_LABEL = "org.proctor.deployment"

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
