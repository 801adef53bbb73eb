"""What an episode costs the shared pieces — Redis and the API — and whether worker hosts add
up, measured in one run against a private Redis (docs/scaling.md reads these figures).

    python bench/redis_cost.py [--episodes 60] [--workers 2] [--actions 5] [--sleepers 16]

The stack: a redis-server of this run's own on a free port, `proctor serve` (one API
process) and one or two `proctor worker` process groups, each with its own PROCTOR_HOST_ID
— which is all a second worker host is, seen from Redis. Real Docker, default settings.

Phases, each bracketed by `INFO commandstats` / `stats` / `cpu` / `memory` and the CPU
time (/proc/PID/stat) of the API process, the redis-server and each worker group:
  - idle:         nothing submitted: what the stack costs Redis per second by itself
                  (heartbeats, janitors, RQ), subtracted from the phases below
  - single:       N HumanEval one-shot episodes, POST /v1/episodes?wait= (4 in flight)
  - batch:        N more in one POST /v1/episodes/batch, then POST /v1/episodes/results?wait=
  - interactive:  E episodes with no action, then E with A actions each (create, act,
                  finish): per episode and, from the difference, per action
  - scale-out:    a batch of sleeping episodes (each test sleeps 4 s: capacity-bound) and
                  a batch of tiny CPU-bound ones, with one worker group, then with two
Plus the memory of each idle warm-pool container (its cgroup: usage, rss, cache), and the
Redis bytes each episode leaves resident, by key family (SCAN + MEMORY USAGE).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import docker
import httpx
import redis
from harness import REPO_ROOT, RESULTS, free_port, machine, summary, table, write
from neighbours import PrivateRedis, engine_cpu_s

from tests import humaneval

TICKS = os.sysconf("SC_CLK_TCK")
POOL_LABEL = "org.proctor.pool"  # workers/sandbox/engine/
DEPLOYMENT_LABEL = "org.proctor.deployment"
BENCH_COMMANDS = {"info", "memory", "scan", "ping", "config|resetstat", "client|setname"}
IN_FLIGHT = 4

# ----------------------------------------------------------------------------- processes


def tree_cpu_s(root: int) -> float:
    """utime + stime of `root` and its live descendants, from /proc."""
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        pid, ppid = int(entry.name), int(rest[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = int(rest[11]) + int(rest[12])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += children.get(pid, [])
    return total / TICKS


class Proc:
    """One `proctor …` command as a subprocess of its own session, stopped by its PID."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log = open(RESULTS / f"redis-cost-{name}.log", "wb")  # noqa: SIM115 - closed in stop
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proctor.cli", *args],
            env=env,
            cwd=REPO_ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_s(self) -> float:
        return tree_cpu_s(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


class Stack:
    """Private Redis, one API process, worker groups added one by one."""

    def __init__(self, exits: ExitStack, workers: int) -> None:
        self.exits = exits
        self.redis_server = PrivateRedis()
        exits.callback(self.redis_server.close)
        self.redis = redis.Redis.from_url(self.redis_server.url, decode_responses=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.deployment = f"bench-redis-cost-{self.port}"
        self.env = {
            **os.environ,
            "PROCTOR_REDIS_URL": self.redis_server.url,
            "PROCTOR_PORT": str(self.port),
            "PROCTOR_DEPLOYMENT": self.deployment,
            "PROCTOR_WORKER_CONCURRENCY": str(workers),
        }
        self.api = self._start("api", ["serve"], {})
        self.groups: list[Proc] = []
        exits.callback(self._remove_leftovers)

    def _start(self, name: str, args: list[str], extra: dict[str, str]) -> Proc:
        proc = Proc(name, args, {**self.env, **extra})
        self.exits.callback(proc.stop)
        return proc

    def add_group(self) -> Proc:
        letter = "ab"[len(self.groups)]
        host = f"bench-{letter}-{int(time.time())}"
        group = self._start(f"workers-{letter}", ["worker"], {"PROCTOR_HOST_ID": host})
        self.groups.append(group)
        self.wait_ready(len(self.groups))
        return group

    def wait_ready(self, hosts: int) -> None:
        """/readyz green with workers of `hosts` hosts, and their warm pools filled."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            for proc in [self.api, *self.groups]:
                if proc.process.poll() is not None:
                    raise RuntimeError(f"{proc.name} exited; see {proc.log.name}")
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=3).status_code == 200
            except httpx.TransportError:
                ready = False
            known = set(self.redis.hvals("proctor:worker-hosts"))
            if ready and len(known) >= hosts:
                time.sleep(5)  # let the warm pools fill
                return
            time.sleep(0.5)
        raise RuntimeError("the stack was not ready in time; see bench/results/redis-cost-*.log")

    def redis_pid(self) -> int:
        return int(self.redis.info("server")["process_id"])

    def _remove_leftovers(self) -> None:
        engine = docker.from_env()
        try:
            label = f"{DEPLOYMENT_LABEL}={self.deployment}"
            for container in engine.containers.list(all=True, filters={"label": label}):
                container.remove(force=True)
            # the honeypot is named after the deployment (workers/main.py), not labelled
            honeypot = f"proctor-honeypot-{self.deployment}"
            for container in engine.containers.list(all=True, filters={"name": honeypot}):
                if container.name == honeypot:  # the filter matches substrings
                    container.remove(force=True)
        finally:
            engine.close()


# ----------------------------------------------------------------------------- measuring


class Snapshot:
    """Redis's counters and the processes' CPU at one moment."""

    def __init__(self, stack: Stack) -> None:
        r = stack.redis
        self.at = time.monotonic()
        self.commands = {
            name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for name, v in r.info("commandstats").items()
        }
        stats, cpu, memory = r.info("stats"), r.info("cpu"), r.info("memory")
        self.net_in = int(stats["total_net_input_bytes"])
        self.net_out = int(stats["total_net_output_bytes"])
        self.processed = int(stats["total_commands_processed"])
        self.reads = int(stats.get("total_reads_processed", 0))
        self.redis_cpu = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
        self.used_memory = int(memory["used_memory"])
        self.api_cpu = stack.api.cpu_s()
        self.worker_cpu = sum(g.cpu_s() for g in stack.groups)
        self.engine_cpu = engine_cpu_s()


class Delta:
    """What happened between two snapshots, net of the idle rate when one is given."""

    def __init__(self, a: Snapshot, b: Snapshot, idle: Delta | None = None) -> None:
        self.seconds = b.at - a.at
        self.commands: dict[str, tuple[float, float]] = {}
        for name, (calls, usec) in b.commands.items():
            c0, u0 = a.commands.get(name, (0, 0))
            if name not in BENCH_COMMANDS and calls > c0:
                self.commands[name] = (calls - c0, usec - u0)
        self.net_in = b.net_in - a.net_in
        self.net_out = b.net_out - a.net_out
        self.processed = b.processed - a.processed
        self.reads = b.reads - a.reads
        self.redis_cpu = b.redis_cpu - a.redis_cpu
        self.api_cpu = b.api_cpu - a.api_cpu
        self.worker_cpu = b.worker_cpu - a.worker_cpu
        self.engine_cpu = b.engine_cpu - a.engine_cpu
        self.used_memory = b.used_memory - a.used_memory
        if idle is not None:  # take off what the stack does by itself meanwhile
            k = self.seconds / idle.seconds
            for name, (calls, usec) in idle.commands.items():
                c, u = self.commands.get(name, (0, 0))
                c, u = c - calls * k, u - usec * k
                if c > 0.5:
                    self.commands[name] = (c, max(u, 0))
                else:
                    self.commands.pop(name, None)
            self.net_in -= round(idle.net_in * k)
            self.net_out -= round(idle.net_out * k)
            self.processed -= round(idle.processed * k)
            self.reads -= round(idle.reads * k)
            self.redis_cpu -= idle.redis_cpu * k
            self.api_cpu -= idle.api_cpu * k
            # the workers are not idle-subtracted: their idle loop is part of the cost

    def per(self, n: float) -> dict[str, Any]:
        calls = sum(c for c, _ in self.commands.values())
        return {
            "seconds": round(self.seconds, 2),
            "commands": round(calls / n, 1),
            "client_commands": round(self.processed / n, 1),
            "reads": round(self.reads / n, 1),
            "net_in_bytes": round(self.net_in / n),
            "net_out_bytes": round(self.net_out / n),
            "redis_cpu_ms": round(1000 * self.redis_cpu / n, 3),
            "api_cpu_ms": round(1000 * self.api_cpu / n, 3),
            "api_redis_cpu_ms": round(1000 * (self.api_cpu + self.redis_cpu) / n, 3),
            "worker_cpu_ms": round(1000 * self.worker_cpu / n, 1),
            "engine_cpu_ms": round(1000 * self.engine_cpu / n, 1),
            "redis_usec_in_commands": round(sum(u for _, u in self.commands.values()) / n, 1),
            "by_command": {
                name: round(c / n, 2)
                for name, (c, _) in sorted(self.commands.items(), key=lambda kv: -kv[1][0])
            },
            "usec_by_command": {
                name: round(u / n, 1)
                for name, (_, u) in sorted(self.commands.items(), key=lambda kv: -kv[1][1])
            },
        }


FAMILIES = [
    (re.compile(r"ep_[0-9a-f]{32}"), "{id}"),
    (re.compile(r"[0-9a-f]{64}"), "{sha256}"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "{uuid}"),
    (re.compile(r"[0-9a-f]{32}"), "{hex}"),
]


def family(key: str) -> str:
    for pattern, name in FAMILIES:
        key = pattern.sub(name, key)
    return key


def resident(r: redis.Redis) -> dict[str, tuple[int, int]]:
    """Key family → (keys, bytes), by SCAN and MEMORY USAGE."""
    out: dict[str, list[int]] = {}
    for key in r.scan_iter(count=1000):
        used = r.memory_usage(key, samples=0) or 0
        entry = out.setdefault(family(key), [0, 0])
        entry[0] += 1
        entry[1] += int(used)
    return {k: (v[0], v[1]) for k, v in out.items()}


def resident_delta(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], n: int
) -> dict[str, dict[str, float]]:
    out = {}
    for name, (keys, used) in after.items():
        k0, u0 = before.get(name, (0, 0))
        if used != u0 or keys != k0:
            out[name] = {"keys": round((keys - k0) / n, 2), "bytes": round((used - u0) / n)}
    return dict(sorted(out.items(), key=lambda kv: -abs(kv[1]["bytes"])))


# ----------------------------------------------------------------------------- workloads


def humaneval_episodes(problems: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    episodes = [humaneval.episode(p) for p in problems]
    return [{**e, "metadata": {**e["metadata"], "round": tag}} for e in episodes]


def tiny(n: int, tag: str, sleep_s: float = 0.0) -> dict[str, Any]:
    pause = f"    time.sleep({sleep_s})\n" if sleep_s else ""
    test = (
        f"import time\n\nfrom solution import add\n\n\ndef test_add():  # {tag}\n"
        f"{pause}    assert add({n}, 1) == {n + 1}\n"
    )
    return {
        "task": {
            "image": "python",
            "tests": {"files": {"test_add.py": test}},
            "limits": {"timeout_s": 30},
        },
        "solution": {"files": {"solution.py": "def add(a, b):\n    return a + b\n"}},
    }


async def single(url: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=IN_FLIGHT + 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(body: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                sent = time.monotonic()
                response = await client.post("/v1/episodes", params={"wait": 300}, json=body)
                response.raise_for_status()
                return {**response.json(), "latency_s": time.monotonic() - sent}

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def batch(url: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One batch request, then one request held until all of it ended (what the SDK's
    trainers do: `proctor.integrations.codetasks.run_episodes`)."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        sent = time.monotonic()
        created = await client.post("/v1/episodes/batch", json={"episodes": bodies})
        created.raise_for_status()
        ids = created.json()["ids"]
        ended: dict[str, dict[str, Any]] = {}
        while pending := [i for i in dict.fromkeys(ids) if i not in ended]:
            answer = await client.post(
                "/v1/episodes/results", params={"wait": 120}, json={"ids": pending}
            )
            answer.raise_for_status()
            latency = time.monotonic() - sent
            ended.update({r["id"]: {**r, "latency_s": latency} for r in answer.json()["results"]})
        return [ended[i] for i in ids]


def interactive(url: str, episodes: int, actions: int) -> list[dict[str, Any]]:
    task = {
        "image": "python",
        "files": {"main.py": "print('hello')\n"},
        "tests": {"files": {"test_main.py": "def test_ok():\n    assert True\n"}},
    }
    out = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for _ in range(episodes):
            created = client.post("/v1/episodes", json={"mode": "interactive", "task": task})
            assert created.status_code == 201, created.text
            episode_id = created.json()["id"]
            for i in range(actions):
                answer = client.post(
                    f"/v1/episodes/{episode_id}/actions",
                    json={"type": "bash", "command": f"echo {i}"},
                )
                assert answer.json()["observation"]["output"] == f"{i}\n", answer.text
            out.append(client.post(f"/v1/episodes/{episode_id}/finish").json())
            time.sleep(0.5)  # let the pool refill, as between a trainer's episodes
    return out


def outcome(results: list[dict[str, Any]]) -> dict[str, Any]:
    hosts = Counter((r.get("sandbox") or {}).get("host") for r in results)
    return {
        "episodes": len(results),
        "reward_1": sum(r.get("reward") == 1.0 for r in results),
        "hosts": dict(hosts),
    }


def shims() -> dict[str, dict[str, float]]:
    """Container id → its containerd shim's RSS and PSS (MiB): memory outside its cgroup."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"containerd-shim" not in argv[0] or b"-id" not in argv:
                continue
            rollup = (entry / "smaps_rollup").read_text()
        except OSError:
            continue
        sizes = dict(line.split(":", 1) for line in rollup.splitlines()[1:] if ":" in line)
        container = argv[argv.index(b"-id") + 1].decode()
        out[container] = {
            k: round(int(sizes[k].split()[0]) / 1024, 2) for k in ("Rss", "Pss") if k in sizes
        }
    return out


def warm_memory(deployment: str) -> list[dict[str, Any]]:
    """Each idle warm-pool container's memory, from its cgroup (via the engine's stats), and
    its shim's (not in the cgroup)."""
    engine = docker.from_env()
    shim = shims()
    rows = []
    try:
        label = [f"{DEPLOYMENT_LABEL}={deployment}", POOL_LABEL]
        for container in engine.containers.list(filters={"label": label}):
            memory = container.stats(stream=False)["memory_stats"]
            stats = memory.get("stats", {})
            usage = int(memory.get("usage", 0))
            cache = int(stats.get("total_cache", stats.get("file", 0)))
            rows.append(
                {
                    "container": container.name,
                    "usage_mib": round(usage / 2**20, 2),
                    "rss_mib": round(int(stats.get("total_rss", stats.get("anon", 0))) / 2**20, 2),
                    "cache_mib": round(cache / 2**20, 2),
                    "usage_minus_cache_mib": round((usage - cache) / 2**20, 2),
                    "shim_rss_mib": shim.get(container.id, {}).get("Rss"),
                    "shim_pss_mib": shim.get(container.id, {}).get("Pss"),
                }
            )
    finally:
        engine.close()
    return rows


# ----------------------------------------------------------------------------- the run


def measured(stack: Stack, idle: Delta | None, n: int, run: Any) -> tuple[dict[str, Any], Any]:
    keys_before = resident(stack.redis)
    before = Snapshot(stack)
    results = run()
    after = Snapshot(stack)
    keys_after = resident(stack.redis)
    delta = Delta(before, after, idle)
    row = delta.per(n)
    row["resident_per_episode"] = resident_delta(keys_before, keys_after, n)
    row["used_memory_per_episode"] = round(delta.used_memory / n)
    return row, results


def idle_rates(stack: Stack, seconds: float) -> Delta:
    before = Snapshot(stack)
    time.sleep(seconds)
    return Delta(before, Snapshot(stack))


def throughput(stack: Stack, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    started = time.monotonic()
    before = Snapshot(stack)
    results = asyncio.run(batch(stack.url, bodies))
    elapsed = time.monotonic() - started
    delta = Delta(before, Snapshot(stack))
    return {
        **outcome(results),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(bodies) / elapsed, 2),
        **summary([r["latency_s"] for r in results]),
        "worker_cpu_s": round(delta.worker_cpu, 1),
        "engine_cpu_s": round(delta.engine_cpu, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=60, help="per one-shot phase")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per group")
    parser.add_argument("--interactive", type=int, default=3, help="interactive episodes")
    parser.add_argument("--actions", type=int, default=5, help="actions per interactive one")
    parser.add_argument("--sleepers", type=int, default=16, help="sleeping episodes (scale-out)")
    parser.add_argument("--sleep-s", type=float, default=4.0, help="what each sleeper sleeps")
    parser.add_argument("--idle-s", type=float, default=15.0)
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    problems = humaneval.load()
    n = args.episodes
    load_before = os.getloadavg()
    data: dict[str, Any] = {"settings": vars(args)}
    with ExitStack() as exits:
        stack = Stack(exits, args.workers)
        stack.add_group()
        data["warm_containers"] = warm_memory(stack.deployment)
        print("idle ...", flush=True)
        idle = idle_rates(stack, args.idle_s)
        data["idle_one_host_per_s"] = idle.per(idle.seconds)
        rows: dict[str, dict[str, Any]] = {}
        asyncio.run(single(stack.url, humaneval_episodes(problems[:4], "warm-up")))

        print(f"single: {n} one-shot episodes, {IN_FLIGHT} in flight ...", flush=True)
        bodies = humaneval_episodes(problems[:n], "single")
        row, results = measured(stack, idle, n, lambda: asyncio.run(single(stack.url, bodies)))
        rows["single"] = {**row, **outcome(results)}

        print(f"batch: {n} one-shot episodes in one request ...", flush=True)
        bodies = humaneval_episodes(problems[n : 2 * n], "batch")
        row, results = measured(stack, idle, n, lambda: asyncio.run(batch(stack.url, bodies)))
        rows["batch"] = {**row, **outcome(results)}

        e, a = args.interactive, args.actions
        print(f"interactive: {e} episodes without actions, {e} with {a} ...", flush=True)
        row0, _ = measured(stack, idle, e, lambda: interactive(stack.url, e, 0))
        rows["interactive_0_actions"] = row0
        row, _ = measured(stack, idle, e, lambda: interactive(stack.url, e, a))
        rows[f"interactive_{a}_actions"] = row
        if a:
            rows["per_action"] = {
                k: round((row[k] - row0[k]) / a, 3)
                for k in (
                    "commands",
                    "client_commands",
                    "reads",
                    "net_in_bytes",
                    "net_out_bytes",
                    "redis_cpu_ms",
                    "api_cpu_ms",
                    "api_redis_cpu_ms",
                )
            }
        data["per_episode"] = rows

        if not args.skip_scale:
            scale = []
            for groups in (1, 2):
                if groups == 2:
                    print("adding a second worker group (host b) ...", flush=True)
                    stack.add_group()
                    idle2 = idle_rates(stack, args.idle_s)
                    data["idle_two_hosts_per_s"] = idle2.per(idle2.seconds)
                for kind in ("sleep", "cpu"):
                    count = args.sleepers if kind == "sleep" else n
                    pause = args.sleep_s if kind == "sleep" else 0.0
                    print(f"scale-out: {groups} group(s), {count} {kind} episodes ...", flush=True)
                    bodies = [tiny(i, f"{kind}-{groups}", pause) for i in range(count)]
                    scale.append({"groups": groups, "kind": kind, **throughput(stack, bodies)})
            data["scale_out"] = scale

    data["machine"] = {
        **machine(),
        "load_1m_before": load_before[0],
        "load_1m_after": os.getloadavg()[0],
    }
    report(data)
    path = write("redis_cost", data)
    print(f"\nwritten to {path}")


def report(data: dict[str, Any]) -> None:
    rows = [{"path": name, **row} for name, row in data["per_episode"].items()]
    print("\nper episode (net of the idle stack):")
    print(
        table(
            rows,
            [
                "path",
                "commands",
                "client_commands",
                "reads",
                "net_in_bytes",
                "net_out_bytes",
                "redis_cpu_ms",
                "api_cpu_ms",
                "api_redis_cpu_ms",
                "worker_cpu_ms",
                "used_memory_per_episode",
            ],
        )
    )
    for name in ("single", "batch"):
        row = data["per_episode"][name]
        print(f"\n{name}: commands per episode: {row['by_command']}")
        print(f"{name}: resident per episode: {row['resident_per_episode']}")
    idle = data["idle_one_host_per_s"]
    print(
        f"\nidle stack, one host, per second: {idle['commands']} commands, "
        f"redis {idle['redis_cpu_ms']} ms CPU, api {idle['api_cpu_ms']} ms CPU: "
        f"{idle['by_command']}"
    )
    if "idle_two_hosts_per_s" in data:
        print(f"idle stack, two hosts, per second: {data['idle_two_hosts_per_s']['commands']}")
    print("\nwarm-pool containers, idle:")
    print(
        table(
            data["warm_containers"],
            [
                "container",
                "usage_mib",
                "rss_mib",
                "cache_mib",
                "usage_minus_cache_mib",
                "shim_rss_mib",
                "shim_pss_mib",
            ],
        )
    )
    if "scale_out" in data:
        print("\nscale-out (batch path):")
        print(
            table(
                data["scale_out"],
                [
                    "groups",
                    "kind",
                    "episodes",
                    "reward_1",
                    "per_s",
                    "p50_s",
                    "p95_s",
                    "elapsed_s",
                    "hosts",
                    "worker_cpu_s",
                ],
            )
        )


if __name__ == "__main__":
    main()
