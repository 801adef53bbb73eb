"""One-shot throughput on HumanEval: Proctor end to end beside two baselines, one run.

    python bench/oneshot.py [--concurrency 1,4,16] [--workers 4] [--limit 164]
                            [--formats junit,assert]

Baselines, measured in the same run on the same programs:
  - subprocess:  each program under a plain `python3` (no isolation at all)
  - docker run:  each program under `docker run --rm --network none` of the sandbox image
Proctor: every episode through the HTTP API → Redis/RQ → a fresh hardened container,
with the dataset's check wrapped as a pytest test and graded from JUnit XML (`junit`), or
run as a plain program passed by the grader's completion nonce (`assert`, no pytest).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from harness import machine, service, summary, table, write

from tests import humaneval

IMAGE = "proctor/sandbox-python:latest"
# the dataset's check as a plain program (the `assert` format): it passes by running to its end
ASSERT_TEMPLATE = """\
import solution as _solution

globals().update({{k: v for k, v in vars(_solution).items() if not k.startswith("__")}})

{test}

check({entry_point})
"""


def episode(problem: dict[str, Any], test_format: str) -> dict[str, Any]:
    body = humaneval.episode(problem)
    if test_format == "assert":
        program = ASSERT_TEMPLATE.format(test=problem["test"], entry_point=problem["entry_point"])
        body["task"]["tests"] = {"files": {"test_solution.py": program}, "format": "assert"}
    return body


def run_programs(programs: list[str], command: list[str], concurrency: int) -> dict[str, Any]:
    def one(program: str) -> tuple[float, bool]:
        started = time.monotonic()
        done = subprocess.run([*command, program], capture_output=True, timeout=120)
        return time.monotonic() - started, done.returncode == 0

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(pool.map(one, programs))
    elapsed = time.monotonic() - started
    return {
        "episodes": len(programs),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(programs) / elapsed, 2),
        "ok": sum(ok for _, ok in outcomes),
        **summary([t for t, _ in outcomes]),
    }


async def run_proctor(url: str, episodes: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        gate = asyncio.Semaphore(concurrency)
        latencies: list[float] = []
        rewards: list[float | None] = []

        async def one(body: dict[str, Any]) -> None:
            async with gate:
                started = time.monotonic()
                response = await client.post("/v1/episodes", params={"wait": 300}, json=body)
                result = response.json()
                latencies.append(time.monotonic() - started)
                rewards.append(result.get("reward"))

        started = time.monotonic()
        await asyncio.gather(*(one(e) for e in episodes))
        elapsed = time.monotonic() - started
    return {
        "episodes": len(episodes),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(episodes) / elapsed, 2),
        "ok": sum(r == 1.0 for r in rewards),
        **summary(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--workers", type=int, default=4, help="Proctor worker processes")
    parser.add_argument("--baseline-concurrency", type=int, default=2)
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument(
        "--formats", default="junit", help="grading formats to measure: junit (pytest), assert"
    )
    args = parser.parse_args()
    if not humaneval.DATA.exists():
        sys.exit(f"HumanEval data not found at {humaneval.DATA}")
    problems = humaneval.load()[: args.limit]
    programs = [humaneval.program(p) for p in problems]
    rows: list[dict[str, Any]] = []

    print(f"subprocess baseline ({len(programs)} programs) ...", flush=True)
    rows.append(
        {
            "system": "python3 subprocess",
            "concurrency": args.baseline_concurrency,
            **run_programs(programs, [sys.executable, "-c"], args.baseline_concurrency),
        }
    )
    print("docker run baseline ...", flush=True)
    docker = ["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c"]
    rows.append(
        {
            "system": "docker run --rm --network none",
            "concurrency": args.baseline_concurrency,
            **run_programs(programs, docker, args.baseline_concurrency),
        }
    )

    with service(worker_concurrency=str(args.workers), pool_size="2") as url:
        for test_format in args.formats.split(","):
            episodes = [episode(p, test_format) for p in problems]
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                print(f"proctor ({test_format}), concurrency {concurrency} ...", flush=True)
                # a fresh run each round: identical requests would share their episodes
                tag = {"round": str(concurrency), "format": test_format}
                fresh = [{**e, "metadata": {**e["metadata"], **tag}} for e in episodes]
                rows.append(
                    {
                        "system": f"proctor ({args.workers} workers, {test_format})",
                        "concurrency": concurrency,
                        **asyncio.run(run_proctor(url, fresh, concurrency)),
                    }
                )

    columns = ["system", "concurrency", "episodes", "ok", "per_s", "p50_s", "p95_s", "elapsed_s"]
    print()
    print(table(rows, columns))
    path = write("oneshot", {"machine": machine(), "rows": rows})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
