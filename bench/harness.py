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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
BENCH_REDIS = os.environ.get("PROCTOR_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

sys.path.insert(0, str(REPO_ROOT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def service(**settings: str) -> Iterator[str]:
    """`proctor run` on a free port and a scratch Redis database; stopped on exit."""
    client = redis.Redis.from_url(BENCH_REDIS)
    client.flushdb()
    client.close()
    port = free_port()
    env = {
        **os.environ,
        "PROCTOR_REDIS_URL": BENCH_REDIS,
        "PROCTOR_PORT": str(port),
        **{f"PROCTOR_{k.upper()}": v for k, v in settings.items()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)  # a fresh clone has no bench/results/
    log = open(RESULTS / f"service-{port}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "run"],
        env=env,
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
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
        time.sleep(2)  # let the warm pools fill
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


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
