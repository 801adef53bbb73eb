"""Shared pieces of the benchmarks: a private service, timing, tables, JSON output."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import redis

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
BENCH_REDIS = os.environ.get("PROCTOR_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
LOCK_KEY = "proctor-test:lock"  # as tests/conftest.py claims a database
# the plain baseline's interpreter: the host's own (Debian's build, what SandboxFusion runs),
# not this venv's (a pyenv build here, 2.4x its start-up CPU)
HOST_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

sys.path.insert(0, str(REPO_ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def service(*, tree: Path = REPO_ROOT, **settings: str) -> Iterator[str]:
    """`proctor run` of the checkout `tree` (this one by default) on a free port and a
    scratch Redis database; stopped on exit. The wait bound is off unless set: the benches'
    closed loops measure throughput and CPU, which a 429 would cut short (`overload.py` and
    `oneshot.py`'s flood measure the bound)."""
    settings = {"max_queue_wait_s": "0", **settings}
    with claimed(BENCH_REDIS) as redis_url, _service(redis_url, settings, tree) as url:
        yield url


@contextmanager
def service_on(redis_url: str, **settings: str) -> Iterator[str]:
    """`service` on a Redis of the caller's (a private one, whose CPU is the run's alone)."""
    with _service(redis_url, settings) as url:
        yield url


@contextmanager
def claimed(preferred: str) -> Iterator[str]:
    """`preferred`, or the next Redis database down that no test session or other bench
    holds (the tests' claim, `tests/conftest.py`): the deployment is named after its Redis
    database, so two runs on one database would share (and fight over) their sandboxes."""
    base, _, db = preferred.rpartition("/")
    for number in dict.fromkeys([int(db or 0), *range(14, 0, -1)]):
        url = f"{base}/{number}"
        client = redis.Redis.from_url(url)
        try:
            # a bench that claimed its database itself (capacity.py) holds it with its pid
            ours = client.get(LOCK_KEY) == str(os.getpid()).encode()
            if not ours and not client.set(LOCK_KEY, os.getpid(), nx=True, ex=7200):
                continue
            for key in client.scan_iter(count=1000):
                if key != LOCK_KEY.encode():
                    client.delete(key)
            try:
                yield url
            finally:
                if not ours:
                    client.delete(LOCK_KEY)
            return
        finally:
            client.close()
    raise RuntimeError("every Redis database is held by a test session or another bench")


@contextmanager
def _service(redis_url: str, settings: dict[str, str], tree: Path = REPO_ROOT) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "PROCTOR_REDIS_URL": redis_url,
        "PROCTOR_PORT": str(port),
        **{f"PROCTOR_{k.upper()}": v for k, v in settings.items()},
    }
    if tree != REPO_ROOT:  # another checkout's packages before this one's installed ones
        env["PYTHONPATH"] = str(tree)
    RESULTS.mkdir(parents=True, exist_ok=True)  # a fresh clone has no bench/results/
    log = open(RESULTS / f"service-{port}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "run"],
        env=env,
        cwd=tree,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    PIDS[url] = process.pid
    REDIS_OF[url] = redis_url
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise RuntimeError(f"the service exited; see {log.name}")
            time.sleep(0.2)
        else:
            raise RuntimeError(f"the service was not ready in time; see {log.name}")
        wait_for_warm_pools(url)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def wait_for_warm_pools(url: str) -> int:
    """`tests.pools.wait_for_warm_pools` for a running `service`."""
    from tests.pools import wait_for_warm_pools as wait

    return wait(REDIS_OF[url])


PIDS: dict[str, int] = {}  # a running `service`'s URL → the pid of its `proctor run`
REDIS_OF: dict[str, str] = {}  # … → the Redis database it uses


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Every descendant of a process."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as handle:
                kids = [int(k) for k in handle.read().split()]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


def service_cpu(url: str) -> dict[str, float]:
    """CPU seconds so far of a `service`'s API process (`proctor run` serves the API itself)
    and of its worker processes, and of the Redis server it uses."""
    pid = PIDS[url]
    workers = 0.0
    for child in children(pid):
        with suppress(OSError):
            workers += cpu_seconds(child)
    client = redis.Redis.from_url(REDIS_OF[url])
    try:
        info = client.info("cpu")
    finally:
        client.close()
    return {
        "api": cpu_seconds(pid),
        "workers": workers,
        "redis": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
    }


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(round(q / 100 * (len(ordered) - 1)), len(ordered) - 1)
    return ordered[index]


def summary(latencies: Sequence[float]) -> dict[str, float]:
    return {
        "p50_s": round(percentile(latencies, 50), 4),
        "p95_s": round(percentile(latencies, 95), 4),
        "mean_s": round(statistics.fmean(latencies), 4) if latencies else float("nan"),
    }


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    for row in rows:
        out.append(
            "  ".join(str(row.get(c, "")).ljust(w) for c, w in zip(columns, widths, strict=True))
        )
    return "\n".join(out)


def write(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
