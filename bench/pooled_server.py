"""The pooled sandboxes on their own: what isolation costs without the API, Redis and workers.

    python bench/pooled_server.py [--concurrency 1,2,8] [--limit 164] [--rounds 2]

The 164 HumanEval canonical solutions (`assert` format), each as the one program a worker
sends a pooled sandbox (the solution written, then the grading plan: `grading_plan`), run
straight through `RunnerPool` from C threads, one pooled sandbox each (the task's limits, no
network: a service's get the honeypot's, which costs an episode nothing it does not use),
and scored as a worker scores them. Beside it, in the same run, the plain subprocess
baseline of `oneshot.py` (the host's own `/usr/bin/python3`). CPU per episode is every
container's (`cpuacct` of Docker's parent cgroup: run it on an otherwise idle engine), with
the minor page faults the episode's processes took (the server's rusage of the children it
reaped during the episode: pages copied from its heap on write, or new).

`episode_cpu.py` says where an episode's CPU goes in the whole stack; this says how far the
sandbox layer alone would go, so the gap between the two is the stack's.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from episode_cpu import sandbox_cpu
from harness import HOST_PYTHON, machine, summary, table, write
from oneshot import PLAIN, episode, ratio, run_programs

from core.config import Settings
from core.defaults import POOLED_EPISODES
from proctor.models import EpisodeCreate
from tests import humaneval
from workers.evaluation.grading import GradingPlan, grading_plan
from workers.sandbox.engine import Engine, SandboxSpec
from workers.sandbox.protocol import Op, Sent, Write
from workers.sandbox.server_sandboxes import RunnerPool
from workers.scored_results import score_test_run


def episode_program(request: EpisodeCreate) -> tuple[list[Op[Any]], GradingPlan]:
    """The operations a worker sends for a one-shot episode with no setup and no actions
    (split, as a root server grades it), and the plan whose run is scored."""
    solution = request.solution
    assert solution is not None
    plan = grading_plan(request.task, keep=set(), restore={}, split=True)
    return [Sent(), Write(files=solution.files), *plan.ops, Sent()], plan


def run_pooled(
    pool: RunnerPool, spec: SandboxSpec, requests: list[EpisodeCreate], concurrency: int
) -> dict[str, Any]:
    def one(index: int) -> tuple[float, bool, int]:
        request = requests[index % len(requests)]
        ops, plan = episode_program(request)
        started = time.monotonic()
        sandbox, _ = pool.acquire(spec, episode_id=f"bench-{index}")
        try:
            reply = sandbox.program(ops, timeout_s=request.task.limits.timeout_s + 5)
            faults = int(sandbox.episode_faults or 0)
        finally:
            pool.release(sandbox)
        result = reply.result(plan.test)
        passed = result is not None and (
            score_test_run(
                result, request.task, oom_killed=result.oom_killed, split=plan.split
            ).reward
            == 1.0
        )
        return time.monotonic() - started, passed, faults

    cpu_before, started = sandbox_cpu(), time.monotonic()
    with ThreadPoolExecutor(concurrency) as threads:
        outcomes = list(threads.map(one, range(len(requests))))
    elapsed = time.monotonic() - started
    cpu_after = sandbox_cpu()
    count = len(outcomes)
    cpu_ms = (
        round((cpu_after - cpu_before) / count * 1000, 2)
        if cpu_before is not None and cpu_after is not None
        else None
    )
    return {
        "episodes": count,
        "elapsed_s": round(elapsed, 2),
        "per_s": round(count / elapsed, 2),
        "ok": sum(ok for _, ok, _ in outcomes),
        "sandbox_cpu_ms": cpu_ms,
        "faults": round(sum(f for _, _, f in outcomes) / count),
        **summary([t for t, _, _ in outcomes]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,8")
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument("--rounds", type=int, default=2, help="each solution this many times")
    args = parser.parse_args()
    if not humaneval.DATA.exists():
        sys.exit(f"HumanEval data not found at {humaneval.DATA}")
    problems = humaneval.load()[: args.limit]
    requests = [EpisodeCreate.model_validate(episode(p, "assert")) for p in problems]
    programs = [humaneval.program(p) for p in problems]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    settings = Settings()
    task = requests[0].task
    limits = task.limits
    spec = SandboxSpec(
        image=settings.images[task.image],
        memory_mb=limits.memory_mb,
        cpus=limits.cpus,
        pids=limits.pids,
        disk_mb=limits.disk_mb,
        user=settings.sandbox_user,
        pooled=True,
    )
    rows: list[dict[str, Any]] = []
    for concurrency in concurrencies:
        print(f"{PLAIN}, concurrency {concurrency} ...", flush=True)
        plain = run_programs(programs * args.rounds, [HOST_PYTHON, "-c"], concurrency)
        rows.append({"system": PLAIN, "concurrency": concurrency, **plain})
    engine = Engine(worker="bench-pooled", host="bench", deployment="bench-pooled")
    pool = RunnerPool(engine, episodes=POOLED_EPISODES, size=max(concurrencies))
    try:
        for concurrency in concurrencies:
            print(f"pooled sandboxes alone, concurrency {concurrency} ...", flush=True)
            run_pooled(pool, spec, requests[: concurrency * 4], concurrency)  # warm the pool
            outcome = run_pooled(pool, spec, requests * args.rounds, concurrency)
            rows.append({"system": "pooled sandboxes", "concurrency": concurrency, **outcome})
    finally:
        pool.close()
    best = max(r["per_s"] for r in rows if r["system"] == PLAIN)
    for row in rows:
        row["vs plain best"] = ratio(row["per_s"], best)
    columns = ["system", "concurrency", "per_s", "p50_s", "p95_s", "ok", "episodes"]
    columns += ["sandbox_cpu_ms", "faults", "vs plain best"]
    print(table(rows, columns))
    data = {"machine": machine(), "rounds": args.rounds, "rows": rows}
    print(f"written to {write('pooled_server', data)}")


if __name__ == "__main__":
    main()
