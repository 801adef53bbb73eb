"""Who a worker is (`worker_name`: host, pid, the process's start, a suffix) and whether a
worker of this host still runs, read from /proc."""

from __future__ import annotations

import os
import uuid


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: [state, ppid, …]; [] when there is none."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_start_ticks(pid: int) -> str:
    """When a process started (clock ticks since boot): with its PID, who it is."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else "0"


def process_alive(pid: int, start_ticks: str) -> bool:
    """The process that started at `start_ticks` runs: exists, and is not a zombie (a
    dead child its parent has not reaped keeps its PID and start time)."""
    fields = _stat(pid)
    return len(fields) > 19 and fields[19] == start_ticks and fields[0] not in ("Z", "X")


def worker_name(host_id: str, *, pid: int | None = None, suffix: str | None = None) -> str:
    """`host.pid.start.suffix`: a restarted container may reuse the PID, never the start.

    A supervisor names its child (`pid`, and the `suffix` it gave the child) to forget
    it the moment it dies.
    """
    pid = os.getpid() if pid is None else pid
    suffix = suffix or uuid.uuid4().hex[:4]
    return f"{host_id}.{pid}.{process_start_ticks(pid)}.{suffix}"


def alive_here(worker: str, *, host: str) -> bool:
    """A worker of this host whose process still runs is slow, not dead."""
    parts = worker.rsplit(".", 3)
    if len(parts) != 4 or parts[0] != host or not parts[1].isdigit():
        return False
    return process_alive(int(parts[1]), parts[2])
