"""verl's request shape under load: what a trainer's correct programs wait behind loops.

    python bench/capacity.py [--workers 2,auto]

verl's own SandboxFusion client (`POST /run_code`, stdin, `run_timeout` 10 s) with 8
requests in flight: 6 endless loops sent at once, then 0.5 s later 2 correct a+b programs.
A host whose capacity is its worker processes keeps the correct ones queued behind the
loops until the trainer's deadline; one whose capacity is its CPU and memory budget runs
all 8 at once. Each `--workers` value is a service of its own (`2`: the old default, one
looping episode per process; `auto`: as many processes as the budget holds). Prints each
request's latency and what verl would score it (1: stdout is the sum), and the worker
processes' resident memory. Goal (issue 12): the correct ones score 1 within 2 s of
being sent.

Then the share line: `LINE_WORKERS` threads, each taking one episode's share of a budget
of `LINE_SHARES` through `workers.capacity.reserve` against the same Redis, holding it
`LINE_HOLD_S` and asking again at once, for `LINE_RUN_S`: how long an episode waits for
its share (the longest wait is what starvation would show) and how many went through,
beside what the budget allows.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

import harness
import httpx
import redis
from harness import machine, table, write

from core.store import EpisodeStore

LOOPS = 6
CORRECT = 2
RUN_TIMEOUT_S = 10.0
GOAL_S = 2.0
LOCK_KEY = "proctor-test:lock"  # tests/conftest.py's claim on a database
LOOP = "while True:\n    pass\n"
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def worker_rss(names: list[str]) -> list[float]:
    """Resident MiB of each live worker process (its name is host.pid.start.suffix)."""
    pids = [int(n.rsplit(".", 3)[1]) for n in names if n.rsplit(".", 3)[1].isdigit()]
    return sorted(round(rss_mb(p), 1) for p in pids if os.path.exists(f"/proc/{p}"))


def request(url: str, index: int, code: str, out: list[dict[str, Any]]) -> None:
    body = {
        "code": f"# request {index}\n{code}",  # distinct: identical requests share an episode
        "language": "python",
        "stdin": "3 4\n",
        "run_timeout": RUN_TIMEOUT_S,
        "compile_timeout": 10,
    }
    sent = time.monotonic()
    with httpx.Client(base_url=url, timeout=120) as client:
        answer = client.post("/run_code", json=body).json()
    latency = time.monotonic() - sent
    run = answer.get("run_result") or {}
    score = int(answer.get("status") == "Success" and (run.get("stdout") or "").strip() == "7")
    out[index] = {
        "request": "loop" if code == LOOP else "a+b",
        "latency_s": round(latency, 2),
        "status": answer.get("status"),
        "run_status": run.get("status", ""),
        "verl_score": score,
    }


def one_round(url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{} for _ in range(LOOPS + CORRECT)]
    codes = [LOOP] * LOOPS + [ADD] * CORRECT
    threads = [threading.Thread(target=request, args=(url, i, c, out)) for i, c in enumerate(codes)]
    for thread in threads[:LOOPS]:
        thread.start()
    time.sleep(0.5)
    for thread in threads[LOOPS:]:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def wait_for_workers(least: int, timeout_s: float = 240) -> list[str]:
    client = redis.Redis.from_url(harness.BENCH_REDIS)
    store = EpisodeStore(client)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            live = store.live_workers(30)
            ready = [w for w in live if w not in store.worker_problems(live)]
            if len(ready) >= least or time.monotonic() > deadline:
                return ready
            time.sleep(1)
    finally:
        client.close()


def claim_database() -> redis.Redis:
    """A Redis database of its own, claimed as the test sessions claim theirs (other
    benchmarks share `harness.BENCH_REDIS`, and would take this one's jobs)."""
    base = harness.BENCH_REDIS.rsplit("/", 1)[0]
    for db in range(13, 0, -1):
        client = redis.Redis.from_url(f"{base}/{db}")
        if client.set(LOCK_KEY, os.getpid(), nx=True, ex=3600):
            harness.BENCH_REDIS = f"{base}/{db}"
            return client
        client.close()
    raise RuntimeError("every Redis database is claimed")


LINE_WORKERS = 8
LINE_SHARES = 4
LINE_HOLD_S = 0.1
LINE_RUN_S = 20.0


def share_line(client: redis.Redis) -> dict[str, Any]:
    """Waits for a share with more workers than the budget holds (see the module docstring)."""
    from core import keys
    from core.config import Settings
    from core.store import EpisodeRecord
    from proctor.models import EpisodeCreate, EpisodeStatus, Solution, TaskSpec, TestSpec
    from workers.capacity import HostBudget, release, reserve

    store = EpisodeStore(client)
    settings = Settings(host_id=f"bench-line-{os.getpid()}")
    host = settings.host_id
    budget = HostBudget(millicpus=LINE_SHARES * 1000, memory_mb=1 << 20)  # 1 CPU each
    request = EpisodeCreate(task=TaskSpec(tests=TestSpec(files={})), solution=Solution())
    waits: list[float] = []
    end = time.monotonic() + LINE_RUN_S

    def worker(number: int) -> None:
        for i in range(1 << 30):
            if time.monotonic() >= end:
                return
            record = EpisodeRecord(
                id=f"ep_{number}_{i}",
                request=request,
                status=EpisodeStatus.queued,
                created=time.time(),
                result=None,
            )
            asked = time.monotonic()
            reserve(store, record, settings=settings, budget=budget, worker=f"w{number}")
            waits.append(time.monotonic() - asked)
            time.sleep(LINE_HOLD_S)
            release(store, host, record.id)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(LINE_WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.delete(keys.reservations(host), keys.waiting(host), keys.waiting_asked(host))
    waits.sort()
    return {
        "workers": LINE_WORKERS,
        "shares": LINE_SHARES,
        "episodes": len(waits),
        "budget_allows": int(LINE_SHARES / LINE_HOLD_S * LINE_RUN_S),
        "wait_p50_s": round(waits[len(waits) // 2], 3),
        "wait_p95_s": round(waits[int(len(waits) * 0.95)], 3),
        "wait_max_s": round(waits[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="2,auto", help="PROCTOR_WORKER_CONCURRENCY values")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    claim = claim_database()
    try:
        measure(args.workers.split(","), rows, memory, claim)
        print("the share line ...", flush=True)
        line = share_line(claim)
    finally:
        claim.delete(LOCK_KEY)
        claim.close()
    report(args.workers.split(","), rows, memory, line)


def measure(
    values: list[str], rows: list[dict[str, Any]], memory: list[dict[str, Any]], claim: redis.Redis
) -> None:
    from core.config import Settings
    from workers.capacity import HostBudget

    for workers in values:
        expected = HostBudget.of(Settings()).processes() if workers == "auto" else int(workers)
        print(f"workers={workers} ({expected} processes) ...", flush=True)
        with harness.service(worker_concurrency=workers, pool_size="1") as url:
            claim.set(LOCK_KEY, os.getpid(), ex=3600)  # the service flushed the database
            names = wait_for_workers(expected)
            harness.wait_for_warm_pools(url)  # the later workers' pools too
            for i, row in enumerate(one_round(url)):
                rows.append({"workers": f"{workers} ({len(names)})", "#": i, **row})
            rss = worker_rss(wait_for_workers(expected))
            memory.append(
                {
                    "workers": workers,
                    "processes": len(rss),
                    "rss_mb_each": f"{min(rss, default=0)}-{max(rss, default=0)}",
                    "rss_mb_total": round(sum(rss), 1),
                }
            )


def report(
    values: list[str],
    rows: list[dict[str, Any]],
    memory: list[dict[str, Any]],
    line: dict[str, Any],
) -> None:
    columns = ["workers", "#", "request", "latency_s", "status", "run_status", "verl_score"]
    print()
    print(table(rows, columns))
    print()
    print(table(memory, ["workers", "processes", "rss_mb_each", "rss_mb_total"]))
    for workers in values:
        correct = [r for r in rows if r["workers"].startswith(f"{workers} ") and r["#"] >= LOOPS]
        worst = max((r["latency_s"] for r in correct), default=float("nan"))
        scored = sum(r["verl_score"] for r in correct)
        verdict = "meets" if scored == CORRECT and worst <= GOAL_S else "misses"
        print(
            f"workers={workers}: correct programs scored {scored}/{CORRECT}, slowest "
            f"{worst:.2f} s ({verdict} the goal of 1 within {GOAL_S:.0f} s)"
        )
    print()
    print(table([line], list(line)))
    data = {"machine": machine(), "rows": rows, "memory": memory, "share_line": line}
    path = write("capacity", data)
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
