"""One-shot throughput on HumanEval: Proctor end to end beside its baselines, one run.

    python bench/oneshot.py [--concurrency 1,4,16,64] [--isolations container,pooled]
                            [--formats assert] [--workers auto] [--limit 164] [--quick]
                            [--sandboxfusion DIR [--sandboxfusion-modes none,lite]]

Baselines, measured in the same run on the same programs and at the same concurrencies:
  - plain:       each program under the host's own `/usr/bin/python3` (Debian's build, what
                 SandboxFusion runs), a subprocess with no isolation at all
  - docker run:  each program under `docker run --rm --network none` of the sandbox image
                 (the engine's default runtime; `--docker-runtimes crun` adds a row under crun)
  - SandboxFusion (`--sandboxfusion DIR`, a set-up checkout: `sandboxfusion.py`): its server,
                 started by this bench with isolation `none` and `lite` and stopped after,
                 sent each program as `POST /run_code`; its commit is in the rows' names
Proctor: every episode through the HTTP API → Redis/RQ → a worker, graded as a plain
program passed by the grader's completion nonce (`assert`) or as a pytest test from JUnit
XML (`junit`), and each program as SandboxFusion's `POST /run_code` with the client of the
SandboxFusion rows, in each isolation: `container` (a fresh hardened container per episode)
and `pooled` (long-lived sandboxes, an episode per fresh uid). Besides throughput and latency:
the rewards of the broken solutions (`return None`: all must be 0), an overload round (C=256
against a queue limit of 128: 429s, nothing lost), the API's and Redis's CPU per episode on
the batch path, and the resident memory of an idle warm container and pooled sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import sandboxfusion
from harness import (
    HOST_PYTHON,
    machine,
    percentile,
    service,
    service_cpu,
    summary,
    table,
    wait_for_warm_pools,
    write,
)

from tests import humaneval

IMAGE = "proctor/sandbox-python:latest"
PLAIN = f"plain {HOST_PYTHON}"
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


# A trainer's client is not what is measured, yet here it shares the service's 2 cores. The
# load comes from aiohttp: httpx spent ~2.9 ms of CPU per request with 256 in flight (spread
# over clients of 16 connections; one pool of 256: 17.7 ms), more than the API's own work
# on a refusal, and held up the episodes measured behind its own CPU; aiohttp ~0.35 ms.
Post = Callable[[dict[str, Any]], Awaitable[tuple[int, dict[str, Any]]]]


@asynccontextmanager
async def poster(url: str, concurrency: int) -> AsyncIterator[Post]:
    """`POST /v1/episodes?wait=300`, at most `concurrency` at once: (status, JSON body).
    A request's clock starts once it has its slot (it is sent at once)."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            async with session.post("/v1/episodes", params={"wait": "300"}, json=body) as answer:
                return answer.status, await answer.json()

        yield post


async def run_proctor(url: str, episodes: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    rewards: list[float | None] = [None] * len(episodes)  # in the episodes' order
    slots = asyncio.Semaphore(concurrency)
    async with poster(url, concurrency) as post:

        async def one(index: int, body: dict[str, Any]) -> None:
            async with slots:
                started = time.monotonic()
                _, result = await post(body)
                latencies.append(time.monotonic() - started)
            rewards[index] = result.get("reward")

        started = time.monotonic()
        await asyncio.gather(*(one(i, e) for i, e in enumerate(episodes)))
        elapsed = time.monotonic() - started
    return {
        "episodes": len(episodes),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(episodes) / elapsed, 2),
        "ok": sum(r == 1.0 for r in rewards),
        "rewards": rewards,
        **summary(latencies),
    }


BATCH = 64  # episodes per `POST /v1/episodes/batch`, as the SDK sends a trainer's batch


def run_batches(url: str, episodes: list[dict[str, Any]], in_flight: int) -> dict[str, Any]:
    """The batch path as a trainer drives it: `POST /v1/episodes/batch` of `BATCH` episodes,
    their results in one held `POST /v1/episodes/results?wait=`, `in_flight` batches at once
    (a new one sent as one ends). Latency is a batch's, from its POST to its last result."""
    chunks = [episodes[i : i + BATCH] for i in range(0, len(episodes), BATCH)]
    rewards: list[float | None] = []
    latencies: list[float] = []

    def one(chunk: list[dict[str, Any]]) -> None:
        with httpx.Client(base_url=url, timeout=600) as client:
            started = time.monotonic()
            response = client.post("/v1/episodes/batch", json={"episodes": chunk})
            response.raise_for_status()
            ids = response.json()["ids"]
            wait_for_all(client, ids)
            latencies.append(time.monotonic() - started)
            answer = client.post("/v1/episodes/results", json={"ids": ids})
            answer.raise_for_status()
            rewards.extend(r.get("reward") for r in answer.json()["results"])

    started = time.monotonic()
    with ThreadPoolExecutor(in_flight) as threads:
        list(threads.map(one, chunks))
    elapsed = time.monotonic() - started
    return {
        "episodes": len(episodes),
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(episodes) / elapsed, 2),
        "ok": sum(r == 1.0 for r in rewards),
        **summary(latencies),
    }


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else ""


async def overload(url: str, episodes: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """Every episode sent at once by `concurrency` clients: what is accepted is answered,
    what is not is a 429 at once; nothing accepted is lost."""
    accepted: list[float] = []
    in_service: list[float] = []  # of those, the service's own time: queued to ended
    refused: list[float] = []
    lost = 0
    slots = asyncio.Semaphore(concurrency)
    async with poster(url, concurrency) as post:

        async def one(body: dict[str, Any]) -> None:
            nonlocal lost
            async with slots:
                started = time.monotonic()
                status, result = await post(body)
                elapsed = time.monotonic() - started
            if status == 429:
                refused.append(elapsed)
            elif result.get("status") == "completed":
                accepted.append(elapsed)
                total = (result.get("timings") or {}).get("total_s")
                if total is not None:
                    in_service.append(total)
            else:
                lost += 1

        started = time.monotonic()
        await asyncio.gather(*(one(e) for e in episodes))
        elapsed = time.monotonic() - started
    return {
        "sent": len(episodes),
        "accepted": len(accepted),
        "refused_429": len(refused),
        "lost": lost,
        "elapsed_s": round(elapsed, 2),
        "refusal_p95_s": round(percentile(refused, 95), 4) if refused else None,
        "in_service_p95_s": round(percentile(in_service, 95), 4) if in_service else None,
        **summary(accepted),
    }


IDLE_S = 10.0  # the idle stack's CPU is measured this long before the batch


def batch_cpu(url: str, episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """CPU per episode of the API process and of Redis on the batch path (a POST of up to 64,
    then one request for their results): as measured, and net of what the idle stack spends
    per second anyway (Redis's own cron and AOF, heartbeats, pool upkeep), measured first."""
    wait_for_warm_pools(url)  # the pools refilled after the rounds before: idle is idle
    idle_before = service_cpu(url)
    time.sleep(IDLE_S)
    idle_after = service_cpu(url)
    idle_rate = {k: (idle_after[k] - idle_before[k]) / IDLE_S for k in idle_after}
    before = service_cpu(url)
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=600) as client:
        # batches the queue limit admits, each waited for before the next
        for chunk in range(0, len(episodes), 64):
            response = client.post(
                "/v1/episodes/batch", json={"episodes": episodes[chunk : chunk + 64]}
            )
            response.raise_for_status()
            wait_for_all(client, response.json()["ids"])
    after = service_cpu(url)
    elapsed = time.monotonic() - started
    per = {k: (after[k] - before[k]) * 1000 / len(episodes) for k in after}
    net = {k: per[k] - idle_rate[k] * elapsed * 1000 / len(episodes) for k in per}
    return {
        "episodes": len(episodes),
        "elapsed_s": round(elapsed, 1),
        "api_ms": round(per["api"], 2),
        "redis_ms": round(per["redis"], 2),
        "api_plus_redis_ms": round(per["api"] + per["redis"], 2),
        "idle_api_plus_redis_ms_per_s": round((idle_rate["api"] + idle_rate["redis"]) * 1000, 2),
        "api_plus_redis_net_ms": round(net["api"] + net["redis"], 2),
        "workers_ms": round(per["workers"], 2),
    }


def wait_for_all(client: httpx.Client, ids: list[str]) -> None:
    """Until a batch ended, as the SDK's trainers wait for it: one request held until all
    ended (asked again for what is still running when a wait runs out)."""
    while ids:
        answer = client.post("/v1/episodes/results", params={"wait": 300}, json={"ids": ids})
        answer.raise_for_status()
        ids = answer.json()["pending"]


def resident_memory() -> dict[str, float]:
    """Mean resident memory (MiB) of idle warm containers, the network holders they joined,
    and idle pooled sandboxes."""
    out = subprocess.run(
        ["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    sizes: dict[str, list[float]] = {
        "warm_container_mib": [],
        "network_holder_mib": [],
        "pooled_sandbox_mib": [],
    }
    units = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "B": 1 / (1 << 20)}
    for line in out.splitlines():
        name, _, usage = line.partition(" ")
        amount = usage.split("/")[0].strip()
        unit = next((u for u in units if amount.endswith(u)), None)
        if not name.startswith("proctor-") or unit is None:
            continue
        key = "pooled_sandbox_mib" if name.startswith("proctor-pooled-") else "warm_container_mib"
        if name.endswith("-netns"):  # the network namespace a fresh sandbox joins
            key = "network_holder_mib"
        sizes[key].append(float(amount[: -len(unit)]) * units[unit])
    return {k: round(sum(v) / len(v), 1) for k, v in sizes.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--isolations", default="container,pooled")
    parser.add_argument(
        "--runtimes",
        default="",
        help="OCI runtimes to measure the container isolation under besides the default (crun"
        " where it runs, else runc): e.g. runc,runsc (runsc: gVisor, with no network)",
    )
    parser.add_argument(
        "--docker-runtimes",
        default="",
        help="OCI runtimes to run the docker run baseline under besides the engine's default,"
        " e.g. crun (the one Proctor's workers pick where it runs)",
    )
    parser.add_argument("--workers", default="auto", help="Proctor worker processes")
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument(
        "--formats", default="assert", help="grading formats to measure: assert, junit (pytest)"
    )
    parser.add_argument("--overload", type=int, default=256, help="clients in the overload round")
    parser.add_argument("--queue-limit", type=int, default=128)
    parser.add_argument(
        "--max-wait",
        default="c16",
        help="the wait bound of the second overload round, in s; c16: the isolation's p95 at"
        " C=16 in this run (waiting bounded to a healthy load's latency)",
    )
    parser.add_argument("--quick", action="store_true", help="no docker run baseline, no overload")
    parser.add_argument(
        "--sandboxfusion",
        type=Path,
        metavar="DIR",
        help="a SandboxFusion checkout: its /run_code rows beside Proctor's (started here)",
    )
    parser.add_argument(
        "--sandboxfusion-python",
        type=Path,
        help="the interpreter of its venv (default: DIR/../venv/bin/python, as its README sets up)",
    )
    parser.add_argument("--sandboxfusion-modes", default="none,lite")
    args = parser.parse_args()
    if not humaneval.DATA.exists():
        sys.exit(f"HumanEval data not found at {humaneval.DATA}")
    problems = humaneval.load()[: args.limit]
    programs = [humaneval.program(p) for p in problems]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    rewards: dict[tuple[str, str, int | str], list[float | None]] = {}

    baselines = [(PLAIN, [HOST_PYTHON, "-c"])]
    if not args.quick:
        docker = ["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c"]
        baselines.append(("docker run --rm --network none", docker))
        for runtime in filter(None, args.docker_runtimes.split(",")):
            named = [*docker[:2], "--runtime", runtime, *docker[2:]]
            baselines.append((f"docker run --runtime {runtime} --rm --network none", named))
    for name, command in baselines:
        for concurrency in concurrencies:
            print(f"{name}, concurrency {concurrency} ...", flush=True)
            rows.append(
                {
                    "system": name,
                    "concurrency": concurrency,
                    **run_programs(programs, command, concurrency),
                }
            )
    best = {name: max(r["per_s"] for r in rows if r["system"] == name) for name, _ in baselines}
    if args.sandboxfusion is not None:
        checkout = args.sandboxfusion.resolve()
        python = args.sandboxfusion_python or checkout.parent / "venv" / "bin" / "python"
        named = sandboxfusion.commit(checkout)
        extra["sandboxfusion"] = {"checkout": str(checkout), "commit": named}
        for mode in args.sandboxfusion_modes.split(","):
            name = f"sandboxfusion {mode} @{named} (/run_code)"
            print(f"{name}: starting it ...", flush=True)
            with sandboxfusion.served(checkout, mode, python) as url:
                for concurrency in concurrencies:
                    print(f"{name}, concurrency {concurrency} ...", flush=True)
                    tag = f"round sandboxfusion-{mode} C={concurrency} {time.time_ns()}"
                    result = asyncio.run(sandboxfusion.run_code(url, programs, concurrency, tag))
                    rows.append({"system": name, "concurrency": concurrency, **result})
            best[f"sandboxfusion {mode}"] = max(r["per_s"] for r in rows if r["system"] == name)
            if mode == "lite":
                print(
                    "sandboxfusion lite leaves network namespaces, veth pairs, NAT rules and"
                    " cgroups behind when it stops (see its README)",
                    flush=True,
                )

    setups: list[tuple[str, str | None]] = [(i, None) for i in args.isolations.split(",")]
    setups += [("container", r) for r in args.runtimes.split(",") if r]
    for isolation, runtime in setups:
        settings = {
            "worker_concurrency": args.workers,
            "pool_size": "2",
            "isolation": isolation,
            "max_queue_depth": str(args.queue_limit),
        }
        if runtime is not None:  # named; unset, the workers pick one (docs/isolation.md)
            settings["runtime"] = runtime
            isolation = f"{isolation}-{runtime}"
        if runtime == "runsc":  # gVisor's netstack gets no network here
            settings["network"] = "none"
        with service(**settings) as url:
            extra[f"memory_{isolation}"] = resident_memory()
            for test_format in args.formats.split(","):
                episodes = [episode(p, test_format) for p in problems]
                for concurrency in concurrencies:
                    print(f"proctor {isolation} ({test_format}), C={concurrency} ...", flush=True)
                    # a fresh run each round: identical requests would share their episodes
                    tag = {"round": str(concurrency), "format": test_format}
                    fresh = [{**e, "metadata": {**e["metadata"], **tag}} for e in episodes]
                    result = asyncio.run(run_proctor(url, fresh, concurrency))
                    rewards[(isolation, test_format, concurrency)] = result.pop("rewards")
                    rows.append(
                        {
                            "system": f"proctor {isolation} ({test_format})",
                            "concurrency": concurrency,
                            **result,
                        }
                    )
                broken = [humaneval.episode(p, broken=True) for p in problems]
                outcome = asyncio.run(run_proctor(url, broken, 16))
                rewards[(isolation, test_format, "broken")] = outcome["rewards"]
                extra[f"broken_{isolation}_{test_format}"] = {
                    "episodes": outcome["episodes"],
                    "reward_0": sum(r == 0.0 for r in outcome["rewards"]),
                }
            for concurrency in concurrencies:
                print(f"proctor {isolation} (/run_code), C={concurrency} ...", flush=True)
                tag_run = f"round proctor-{isolation} C={concurrency} {time.time_ns()}"
                result = asyncio.run(sandboxfusion.run_code(url, programs, concurrency, tag_run))
                rows.append(
                    {
                        "system": f"proctor {isolation} (/run_code)",
                        "concurrency": concurrency,
                        **result,
                    }
                )
            # the batch path: two batches of 64 in flight fill a queue bound of 128
            print(f"proctor {isolation} (assert, batch of {BATCH}) ...", flush=True)
            tag = {"round": f"batch {time.time_ns()}"}
            batches = [episode(p, "assert") for p in problems] * 2
            batches = [
                {**e, "metadata": {**e["metadata"], **tag, "copy": str(i // len(problems))}}
                for i, e in enumerate(batches)
            ]
            rows.append(
                {
                    "system": f"proctor {isolation} (assert, batch of {BATCH})",
                    "concurrency": 2 * BATCH,
                    **run_batches(url, batches, in_flight=2),
                }
            )
            tag = {"round": "batch-cpu"}
            batch = [{**e, "metadata": {**e["metadata"], **tag}} for e in episodes]
            print(f"proctor {isolation}: CPU per episode on the batch path ...", flush=True)
            extra[f"cpu_{isolation}"] = batch_cpu(url, batch)
            if not args.quick:
                print(f"proctor {isolation}: overload, C={args.overload} ...", flush=True)
                flood = [
                    {**e, "metadata": {**e["metadata"], "round": f"overload-{i}"}}
                    for i in range(3)
                    for e in episodes
                ]
                extra[f"overload_{isolation}"] = asyncio.run(overload(url, flood, args.overload))
        if not args.quick:
            # the same flood against the depth bound and a wait bound (PROCTOR_MAX_QUEUE_WAIT_S)
            at_16 = next(
                (
                    r["p95_s"]
                    for r in rows
                    if r["concurrency"] == 16 and r["system"].startswith(f"proctor {isolation} (")
                ),
                None,
            )
            wait = at_16 if args.max_wait == "c16" else float(args.max_wait)
            if wait:
                print(f"proctor {isolation}: overload, wait bound {wait} s ...", flush=True)
                with service(**settings, max_queue_wait_s=str(wait)) as url:
                    # a service that has run before: the pace the bound uses is measured; and
                    # its pools refilled after that round, as they were before the C=16 one
                    warm = [{**e, "metadata": {**e["metadata"], "round": "pace"}} for e in episodes]
                    asyncio.run(run_proctor(url, warm, 16))
                    wait_for_warm_pools(url)
                    bounded = asyncio.run(overload(url, flood, args.overload))
                extra[f"overload_{isolation}_wait_bound"] = {"max_wait_s": wait, **bounded}
            for key in (f"overload_{isolation}", f"overload_{isolation}_wait_bound"):
                if at_16 and key in extra:
                    extra[key]["p95_x_c16"] = round(extra[key]["p95_s"] / at_16, 2)

    # every episode's reward is the same in every isolation and at every concurrency
    for kind in ("canonical", "broken"):
        runs = [v for (_, _, c), v in rewards.items() if (c == "broken") == (kind == "broken")]
        extra[f"identical_rewards_{kind}"] = all(r == runs[0] for r in runs) if runs else None
    plain, docker_best, sf_none = (
        best.get(PLAIN, 0.0),
        best.get("docker run --rm --network none", 0.0),
        best.get("sandboxfusion none", 0.0),
    )
    plain_at = {r["concurrency"]: r["per_s"] for r in rows if r["system"] == PLAIN}
    for row in rows:
        row["x_plain"] = ratio(row["per_s"], plain)
        row["x_plain_same_c"] = ratio(row["per_s"], plain_at.get(row["concurrency"], 0.0))
        row["x_docker_run"] = ratio(row["per_s"], docker_best)
        row["x_sf_none"] = ratio(row["per_s"], sf_none)
    columns = [
        "system",
        "concurrency",
        "episodes",
        "ok",
        "per_s",
        "x_plain",
        "x_plain_same_c",
        "x_docker_run",
        "x_sf_none",
        "p50_s",
        "p95_s",
        "elapsed_s",
    ]
    print()
    print(table(rows, columns))
    print(
        "\nratios are to the best throughput of each baseline in this run (x_sf_none:"
        f" SandboxFusion without isolation); x_plain_same_c to {PLAIN} at the same concurrency"
    )
    for key, value in extra.items():
        print(f"{key}: {json.dumps(value)}")
    path = write("oneshot", {"machine": machine(), "rows": rows, **extra})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
