"""Noisy neighbours: a tiny one-shot episode's latency while another sandbox misbehaves,
as a ratio to the same episode on an idle service, measured in one run.

    python bench/neighbours.py [--phase-s 20] [--workers 2]

The neighbour is a correct a+b solution with one assert, sent one at a time (POST
?wait=), so its latency is what one trainer sees. Beside it, through the same service and
the same limits every episode gets, an aggressor sandbox runs one of:
  - oom:   allocates past its memory_mb in a loop, each allocation OOM-killed by the kernel
  - fork:  a fork bomb against its pids limit
  - disk:  fills its tmpfs mounts until they are full, frees them, fills them again
  - cpu:   busy loops on as many processes as the host has CPUs (its quota caps them)
Each aggressor phase is preceded by an idle phase of the same length, and its ratio is to
that idle phase, so drift on a shared host weighs on both sides alike. Goal: <= 1.5x at p50.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import docker
import harness
import httpx
import redis
from docker.errors import NotFound
from harness import free_port, machine, percentile, summary, table, write

from core import keys

GOAL = 1.5
REAPER_S = 1  # how soon a cancelled aggressor's sandbox is removed
SOLUTION = "def add(a, b):\n    return a + b\n"

# Each aggressor is the body of a test function; `END` is when it stops by itself (the
# bench also cancels it when its phase is over). Limits are the defaults but where named.
AGGRESSORS: dict[str, tuple[str, dict[str, Any]]] = {
    "oom": (
        """
    chunk = 512 << 20  # four times memory_mb: the kernel kills the child every time
    while time.time() < END:
        pid = os.fork()
        if pid == 0:
            data = b"x" * chunk  # touches every page
            os._exit(len(data) & 0)
        os.waitpid(pid, 0)
""",
        {"memory_mb": 128},
    ),
    "fork": (
        """
    root = os.getpid()
    while time.time() < END:
        try:
            os.fork()  # parents and children alike go on forking until END
        except OSError:
            pass  # at the pids limit: try again
    if os.getpid() != root:
        os._exit(0)
""",
        {},
    ),
    "disk": (
        """
    block = b"x" * (1 << 20)
    while time.time() < END:
        for where in (".", "/tmp", os.path.expanduser("~")):
            path = os.path.join(where, "fill")
            try:
                with open(path, "wb") as handle:
                    while time.time() < END:
                        handle.write(block)
            except OSError:
                pass  # full
            try:
                os.remove(path)
            except OSError:
                pass
""",
        {},
    ),
    "cpu": (
        """
    root = os.getpid()
    for _ in range((os.cpu_count() or 1) - 1):
        if os.fork() == 0:
            break
    while time.time() < END:
        pass
    if os.getpid() != root:
        os._exit(0)
""",
        {},
    ),
}


def neighbour(n: int) -> dict[str, Any]:
    test = f"from solution import add\n\n\ndef test_add():\n    assert add({n}, 1) == {n + 1}\n"
    return {
        "task": {
            "image": "python",
            "tests": {"files": {"test_add.py": test}},
            "limits": {"timeout_s": 10},
        },
        "solution": {"files": {"solution.py": SOLUTION}},
    }


def aggressor(kind: str, n: int, seconds: float) -> dict[str, Any]:
    body, limits = AGGRESSORS[kind]
    test = (
        f"import os\nimport time\n\nEND = time.time() + {seconds:.0f}  # run {n}\n\n\n"
        f"def test_aggress():{body}"
    )
    return {
        "task": {
            "image": "python",
            "tests": {"files": {"test_aggress.py": test}},
            "limits": {"timeout_s": seconds + 10, **limits},
            "policy": {"disabled_rules": ["*"]},
        },
        "solution": {"files": {"solution.py": SOLUTION}},
    }


class Aggressor(threading.Thread):
    """Keeps one aggressor episode running until stopped (a new one when one ends)."""

    def __init__(self, url: str, kind: str, seconds: float) -> None:
        super().__init__(daemon=True, name=f"aggressor-{kind}")
        self.url, self.kind, self.seconds = url, kind, seconds
        self.stopping = threading.Event()
        self.running = threading.Event()
        self.episodes: list[dict[str, Any]] = []
        self.current: str | None = None

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=self.seconds + 120) as http:
            n = 0
            while not self.stopping.is_set():
                n += 1
                created = http.post("/v1/episodes", json=aggressor(self.kind, n, self.seconds))
                created.raise_for_status()
                self.current = created.json()["id"]
                while not self.stopping.is_set():
                    record = http.get(f"/v1/episodes/{self.current}", params={"wait": 1}).json()
                    if record["status"] == "running":
                        self.running.set()
                    if record["status"] in ("completed", "failed", "cancelled"):
                        self.episodes.append({k: record.get(k) for k in ("verdict", "reason")})
                        break

    def stop(self, url: str, redis_url: str) -> None:
        """Cancel the running one, and wait until its sandbox is gone (its worker's janitor
        removes it within a sweep), so the next idle phase is idle."""
        self.stopping.set()
        if self.current:
            httpx.delete(f"{url}/v1/episodes/{self.current}", timeout=30)
        self.join(timeout=60)
        if not self.current:
            return
        with redis.Redis.from_url(redis_url, decode_responses=True) as client:
            name = client.hget(keys.episode(self.current), "container")
        engine = docker.from_env()
        try:
            deadline = time.monotonic() + 60
            while name and time.monotonic() < deadline:
                try:
                    engine.containers.get(name)
                except NotFound:
                    break
                time.sleep(REAPER_S / 2)
            else:
                if name:
                    raise RuntimeError(
                        f"the {self.kind} aggressor's sandbox {name} outlived its cancel"
                    )
        finally:
            engine.close()
        time.sleep(1)


class Phase:
    """Tiny episodes one after another for `seconds`, and what the host did meanwhile:
    where the neighbour's time went (its result's timings), how busy the CPUs and the
    container engine were, how many OOM kills the engine reported."""

    def __init__(self, http: httpx.Client, seconds: float, start: int) -> None:
        self.latencies: list[float] = []
        self.parts: dict[str, list[float]] = {"queued_s": [], "sandbox_start_s": [], "run_s": []}
        self.failed = 0
        engine_before, host_before, began = engine_cpu_s(), host_cpu(), time.time()
        deadline = time.monotonic() + seconds
        n = start
        while time.monotonic() < deadline or len(self.latencies) < 5:
            n += 1
            sent = time.monotonic()
            response = http.post("/v1/episodes", params={"wait": 120}, json=neighbour(n))
            self.latencies.append(time.monotonic() - sent)
            result = response.json() if response.status_code == 200 else {}
            if result.get("reward") != 1.0:
                self.failed += 1
            for part, values in self.parts.items():
                value = (result.get("timings") or {}).get(part)
                if value is not None:
                    values.append(float(value))
        elapsed = time.time() - began
        self.engine_cpu_pct = round(100 * (engine_cpu_s() - engine_before) / elapsed, 1)
        busy, total = (a - b for a, b in zip(host_cpu(), host_before, strict=True))
        self.host_busy_pct = round(100 * busy / total, 1) if total else float("nan")
        self.oom_events = oom_events(began, time.time())

    def medians(self) -> dict[str, float]:
        return {part: round(percentile(values, 50), 3) for part, values in self.parts.items()}


ENGINE = ("dockerd", "containerd")


def engine_cpu_s() -> float:
    """CPU seconds the container engine's daemons have used (read from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        if name in ENGINE:
            used += int(rest[11]) + int(rest[12])
    return used / ticks


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def oom_events(since: float, until: float) -> int:
    client = docker.from_env()
    try:
        events = client.events(
            since=int(since), until=int(until) + 1, filters={"event": "oom"}, decode=True
        )
        return sum(1 for _ in events)
    finally:
        client.close()


class PrivateRedis:
    """A redis-server of this run's own, so no shared database is flushed under anyone."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="proctor-neighbours-"))
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        client.close()

    def close(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--phase-s", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--workers", type=int, default=2, help="Proctor worker processes")
    parser.add_argument("--only", default=",".join(AGGRESSORS), help="aggressors to run")
    args = parser.parse_args()
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    store = PrivateRedis()
    harness.BENCH_REDIS = store.url  # service() flushes and uses this database
    try:
        settings = {
            "worker_concurrency": str(args.workers),
            "pool_size": "2",
            "network": "none",
            "reaper_interval_s": str(REAPER_S),
        }
        with harness.service(**settings) as url, httpx.Client(base_url=url, timeout=180) as http:
            Phase(http, 3, 0)  # warm up: imports, pools, page cache
            n = 1000
            for kind in args.only.split(","):
                print(f"idle, then beside {kind} ({args.phase_s:.0f} s each) ...", flush=True)
                idle = Phase(http, args.phase_s, n)
                n += 1000
                noisy = Aggressor(url, kind, args.phase_s * 3)
                noisy.start()
                if not noisy.running.wait(120):
                    raise RuntimeError(f"the {kind} aggressor did not start running")
                time.sleep(2)  # let it get going
                loaded = Phase(http, args.phase_s, n)
                n += 1000
                noisy.stop(url, store.url)
                idle_s, loaded_s = summary(idle.latencies), summary(loaded.latencies)
                ratio = loaded_s["p50_s"] / idle_s["p50_s"]
                rows.append(
                    {
                        "aggressor": kind,
                        "idle_p50_s": idle_s["p50_s"],
                        "loaded_p50_s": loaded_s["p50_s"],
                        "ratio_p50": round(ratio, 2),
                        "idle_p95_s": idle_s["p95_s"],
                        "loaded_p95_s": loaded_s["p95_s"],
                        "ratio_p95": round(loaded_s["p95_s"] / idle_s["p95_s"], 2),
                        "samples": f"{len(idle.latencies)}/{len(loaded.latencies)}",
                        "not_passed": idle.failed + loaded.failed,
                        "aggressor_episodes": len(noisy.episodes) + 1,
                        "goal_met": ratio <= GOAL,
                        "parts_idle": idle.medians(),
                        "parts_loaded": loaded.medians(),
                        "start_s": f"{idle.medians()['sandbox_start_s']}/"
                        f"{loaded.medians()['sandbox_start_s']}",
                        "run_s": f"{idle.medians()['run_s']}/{loaded.medians()['run_s']}",
                        "host_busy_pct": f"{idle.host_busy_pct}/{loaded.host_busy_pct}",
                        "engine_cpu_pct": f"{idle.engine_cpu_pct}/{loaded.engine_cpu_pct}",
                        "oom_events": loaded.oom_events,
                    }
                )
                print(
                    f"  {kind}: p50 {idle_s['p50_s']} s idle, {loaded_s['p50_s']} s beside "
                    f"it ({ratio:.2f}x)",
                    flush=True,
                )
    finally:
        store.close()
    columns = [
        "aggressor",
        "idle_p50_s",
        "loaded_p50_s",
        "ratio_p50",
        "ratio_p95",
        "samples",
        "not_passed",
        "goal_met",
    ]
    print()
    print(table(rows, columns))
    print("\nwhere the time went (idle/beside, medians) and what the host did meanwhile:")
    print(
        table(
            rows, ["aggressor", "start_s", "run_s", "host_busy_pct", "engine_cpu_pct", "oom_events"]
        )
    )
    load_after = os.getloadavg()
    print(f"\nhost load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    path = write(
        "neighbours",
        {
            "machine": {
                **machine(),
                "load_1m_before": load_before[0],
                "load_1m_after": load_after[0],
            },
            "goal": f"neighbour p50 beside each aggressor <= {GOAL}x idle",
            "phase_s": args.phase_s,
            "workers": args.workers,
            "rows": rows,
        },
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
