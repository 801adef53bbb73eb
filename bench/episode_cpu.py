"""Where an episode's CPU goes: each part of the stack, in milliseconds of CPU per episode.

    python bench/episode_cpu.py [--isolation pooled] [--concurrency 16] [--limit 164] [--rounds 3]

The 164 HumanEval canonical solutions (`assert` format) through a private service at one
concurrency, after a warm-up round, in `--rounds` rounds (each part's median is reported:
this machine's speed moves between runs); CPU read before and after from /proc (the API process,
its worker processes, dockerd, containerd and the containerd shims), from Redis's `INFO cpu`,
from the sandboxes' cgroup (`cpuacct` of Docker's parent cgroup: every container, so run it
on an otherwise idle engine) and from this process (the HTTP client); `other` is the rest of
what the machine's busy time (/proc/stat) grew by: runc and the engine's other short-lived
processes, the kernel's own work (run it on an otherwise idle machine). The sum bounds the
throughput the machine's cores allow; on a host where the trainer runs elsewhere, the
client's share is not the service's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from harness import machine, service, service_cpu, table, write
from oneshot import episode, run_proctor

from tests import humaneval

DAEMONS = ("dockerd", "containerd", "containerd-shim")
# cgroup v1's cpuacct of Docker's containers, then v2's docker slice
SANDBOX_CGROUPS = (
    Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage"),
    Path("/sys/fs/cgroup/system.slice/cpu.stat"),
)
TICK = os.sysconf("SC_CLK_TCK")


def daemon_cpu() -> dict[str, float]:
    """CPU seconds so far of every process named like an engine daemon, by name."""
    totals = dict.fromkeys(DAEMONS, 0.0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            name = Path(f"/proc/{entry}/comm").read_text().strip()
            if name in totals:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                totals[name] += (int(fields[11]) + int(fields[12])) / TICK
        except OSError:
            continue
    return totals


def sandbox_cpu() -> float | None:
    """CPU seconds so far of every container (None: no cgroup this knows)."""
    v1, v2 = SANDBOX_CGROUPS
    if v1.exists():
        return int(v1.read_text()) / 1e9
    if v2.exists():
        for line in v2.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return int(value) / 1e6
    return None


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy (every process, the kernel, interrupts)."""
    with open("/proc/stat") as handle:
        fields = [int(f) for f in handle.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / TICK


def snapshot(url: str) -> dict[str, float | None]:
    return {
        **service_cpu(url),
        **daemon_cpu(),
        "sandboxes": sandbox_cpu(),
        "bench client": client_cpu(),
    }


def measure(url: str, bodies: list[dict[str, Any]], concurrency: int, index: int) -> dict[str, Any]:
    """One round of every episode (new to the service: its own metadata): ms of CPU per
    episode by part, with `other`, the busy time no part claims."""
    fresh = [{**b, "metadata": {**b["metadata"], "round": str(index)}} for b in bodies]
    before, busy, started = snapshot(url), machine_cpu(), time.monotonic()
    outcome = asyncio.run(run_proctor(url, fresh, concurrency))
    after, elapsed = snapshot(url), time.monotonic() - started
    busy = machine_cpu() - busy
    count = len(fresh)
    ms = {
        part: (after_value - start) / count * 1000
        for part, start in before.items()
        if start is not None and (after_value := after[part]) is not None
    }
    # what no part above names: runc and the other short-lived engine processes, the kernel
    ms["other"] = max(busy / count * 1000 - sum(ms.values()), 0.0)
    return {"ms": ms, "ok": outcome["ok"], "per_s": count / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--isolation", default="pooled", choices=("pooled", "container"))
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (median)")
    args = parser.parse_args()
    problems = humaneval.load()[: args.limit]
    bodies = [episode(p, "assert") for p in problems]
    with service(isolation=args.isolation, pool_size="2") as url:
        warm = [{**b, "metadata": {**b["metadata"], "round": "warm"}} for b in bodies[:32]]
        asyncio.run(run_proctor(url, warm, args.concurrency))
        rounds = [measure(url, bodies, args.concurrency, i) for i in range(args.rounds)]
    count = len(bodies)
    # the median of each part over the rounds: this machine's speed moves between runs
    parts = list(rounds[0]["ms"])
    rows = [
        {"part": part, "ms_per_episode": round(statistics.median(r["ms"][part] for r in rounds), 2)}
        for part in parts
    ]
    totals = [sum(r["ms"].values()) for r in rounds]
    total = sum(r["ms_per_episode"] for r in rows)
    rows.append({"part": "total", "ms_per_episode": round(total, 2)})
    per_s = statistics.median(r["per_s"] for r in rounds)
    cores = os.cpu_count() or 1
    data = {
        "machine": machine(),
        "isolation": args.isolation,
        "concurrency": args.concurrency,
        "episodes": count,
        "rounds": args.rounds,
        "passed": min(r["ok"] for r in rounds),  # of each round's episodes
        "per_s": round(per_s, 2),
        "total_ms_range": [round(min(totals), 2), round(max(totals), 2)],
        "bound_per_s": round(cores * 1000 / total, 1) if total else None,
        "rows": rows,
    }
    print(table(rows, ["part", "ms_per_episode"]))
    print(
        f"\n{args.isolation}, C={args.concurrency}, median of {args.rounds} rounds: "
        f"{data['per_s']}/s measured, {data['bound_per_s']}/s at most on {cores} cores at this "
        f"CPU per episode (total {min(totals):.1f} to {max(totals):.1f} ms over the rounds)"
    )
    print(f"written to {write('episode_cpu', data)}")


if __name__ == "__main__":
    main()
