"""The API's own CPU per episode on the batch path, without Docker: a stand-in worker moves
each episode through the statuses a real one writes (starting, running, then a HumanEval-
sized result), so what is measured is the API process and Redis alone, repeatably.

    python bench/api_cost.py [--episodes 200] [--rounds 3] [--refusals 3000] [--profile]

The stack: a redis-server of this run's own, `proctor serve` (one API process). Each round
sends one `POST /v1/episodes/batch` and a `POST /v1/episodes/results?wait=` for all of it
(what the SDK's trainers do), while the stand-in ends the episodes. Reported per episode: the API
process's CPU (utime + stime, /proc), Redis's CPU, and the commands and bytes Redis served
on behalf of the API (the stand-in's own writes are counted apart, by a client of its own
that `INFO commandstats` cannot tell from the API's: so read `commands` from
bench/redis_cost.py, which runs real workers). `--profile` runs the app in this process
under cProfile instead (threads' work inlined) and prints the top functions.

Then what a refusal costs the API under a flood (`--refusals` requests from 256 keep-alive
connections, the queue full): asked of Redis each time (no drain rate known, so the door
never shuts), and with the door (`service/door.py`) shut by a known drain rate.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import aiohttp
import httpx
import redis
from harness import REPO_ROOT, RESULTS, free_port, write
from neighbours import PrivateRedis
from redis_cost import batch

from core import keys
from core.endings import ended
from core.store import EpisodeStore
from proctor.models import (
    EpisodeStatus,
    SandboxInfo,
    TestCase,
    TestOutcome,
    Timings,
    Verdict,
)
from tests import humaneval

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        rest = handle.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICKS


class StandIn(threading.Thread):
    """Plays the workers: every queued episode is started, run and ended with reward 1."""

    def __init__(self, url: str, pace_s: float) -> None:
        super().__init__(daemon=True)
        self.store = EpisodeStore(redis.Redis.from_url(url))
        self.pace_s = pace_s  # between an episode's status changes, as a worker's run
        self.stop = threading.Event()

    def run(self) -> None:
        store = self.store
        while not self.stop.is_set():
            ids = [x.decode() for x in store.redis.zrange("proctor:queued", 0, 49)]
            if not ids:
                time.sleep(0.01)
                continue
            for episode_id in ids:
                record = store.get(episode_id)
                if record is None:
                    continue
                store.advance(episode_id, EpisodeStatus.starting, worker="stand-in", host="h")
                time.sleep(self.pace_s)
                store.advance(episode_id, EpisodeStatus.running, container="c")
                time.sleep(self.pace_s)
                result = ended(
                    record,
                    EpisodeStatus.completed,
                    Verdict.passed,
                    reward=1.0,
                    passed=True,
                    reason="all 1 tests passed",
                    tests=[
                        TestCase(name="test_check", outcome=TestOutcome.passed, duration_s=0.01)
                    ],
                    stdout="============================= 1 passed in 0.05s ======\n" * 3,
                    exit_code=0,
                    timings=Timings(queued_s=0.5, sandbox_start_s=0.1, run_s=0.3, total_s=0.9),
                    sandbox=SandboxInfo(image="python", host="h", network="none"),
                )
                store.finish(result, request=record.request)


def bodies_of(problems: list[dict[str, Any]], n: int, tag: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        e = humaneval.episode(problems[i % len(problems)])
        out.append({**e, "metadata": {**e["metadata"], "round": tag, "i": str(i)}})
    return out


def wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the API did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=200, help="per round (one batch)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pace-s", type=float, default=0.01, help="between status changes")
    parser.add_argument("--refusals", type=int, default=3000, help="requests per refusal flood")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    problems = humaneval.load()
    server = PrivateRedis()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PROCTOR_REDIS_URL": server.url,
        "PROCTOR_PORT": str(port),
        "PROCTOR_DEPLOYMENT": f"bench-api-cost-{port}",
        "PROCTOR_MAX_BATCH": str(max(args.episodes, 1000)),
    }
    stand_in = StandIn(server.url, args.pace_s)
    stand_in.start()
    client = redis.Redis.from_url(server.url)
    try:
        if args.profile:
            profile(env, port, url, problems, args)
            return
        api = subprocess.Popen(
            [sys.executable, "-m", "proctor.cli", "serve"],
            env=env,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_up(url)
            asyncio.run(batch(url, bodies_of(problems, 20, "warm-up")))
            rows = []
            for r in range(args.rounds):
                bodies = bodies_of(problems, args.episodes, f"round-{r}")
                api0, redis0 = cpu_s(api.pid), redis_cpu(client)
                stats0 = client.info("stats")
                asyncio.run(batch(url, bodies))
                api1, redis1 = cpu_s(api.pid), redis_cpu(client)
                stats1 = client.info("stats")
                n = args.episodes
                rows.append(
                    {
                        "api_cpu_ms": round(1000 * (api1 - api0) / n, 3),
                        "redis_cpu_ms": round(1000 * (redis1 - redis0) / n, 3),
                        "redis_commands_all": round(
                            (
                                stats1["total_commands_processed"]
                                - stats0["total_commands_processed"]
                            )
                            / n,
                            1,
                        ),
                    }
                )
                print(rows[-1], flush=True)
            best = min(rows, key=lambda row: row["api_cpu_ms"])
            print(f"best of {args.rounds}: {best}")
        finally:
            api.send_signal(signal.SIGTERM)
            api.wait(timeout=30)
        stand_in.stop.set()  # from here on, what is queued stays queued
        stand_in.join(timeout=5)
        refused = refusal_cost(env, client, bodies_of(problems, args.refusals, "refused"))
        RESULTS.mkdir(parents=True, exist_ok=True)
        write(
            "api_cost",
            {"settings": vars(args), "rounds": rows, "best": best, "refusals": refused},
        )
    finally:
        stand_in.stop.set()
        stand_in.join(timeout=5)
        server.close()


def refusal_cost(
    env: dict[str, str], client: redis.Redis, bodies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The API's CPU per refused request, the queue full (a depth bound of 1, one episode
    queued and nobody taking it), asked of Redis each time and then with the door shut."""
    api = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "serve"],
        env={**env, "PROCTOR_MAX_QUEUE_DEPTH": "1", "PROCTOR_DEDUP_TTL_S": "0"},
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{env['PROCTOR_PORT']}"
    rows = []
    try:
        wait_up(url)
        httpx.post(f"{url}/v1/episodes", json=bodies[0]).raise_for_status()  # the queue is full
        for refused_by, gap in (("redis", None), ("door", "0.5")):
            # the door shuts only for as long as a known drain rate says the queue needs
            client.delete(keys.PACE)
            if gap is not None:
                client.hset(keys.PACE, "gap", gap)
            before = cpu_s(api.pid)
            statuses, at_door = asyncio.run(flood(url, bodies[1:]))
            per_ms = 1000 * (cpu_s(api.pid) - before) / len(statuses)
            rows.append(
                {
                    "refused_by": refused_by,
                    "requests": len(statuses),
                    "all_429": all(code == 429 for code in statuses),
                    "answered_at_door": at_door,
                    "api_cpu_ms_per_request": round(per_ms, 3),
                }
            )
            print(rows[-1], flush=True)
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(timeout=30)
    return rows


async def flood(url: str, bodies: list[dict[str, Any]]) -> tuple[list[int], int]:
    """Every body sent from 256 keep-alive connections at once; the statuses, and how many
    were refused at the door (its message) rather than by Redis."""
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(url, connector=connector) as session:
        slots = asyncio.Semaphore(256)

        async def one(body: dict[str, Any]) -> tuple[int, bool]:
            async with slots, session.post("/v1/episodes", json=body) as response:
                answer = await response.json()
                message = answer.get("error", {}).get("message", "")
                return response.status, "over its bound" in message

        answers = await asyncio.gather(*(one(body) for body in bodies))
    return [status for status, _ in answers], sum(door for _, door in answers)


def redis_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def profile(
    env: dict[str, str], port: int, url: str, problems: list[dict[str, Any]], args: Any
) -> None:
    """The app in this process under cProfile, `to_thread` inlined so its work is seen."""
    import anyio.to_thread
    import uvicorn

    os.environ.update(env)

    async def inline(func: Any, *a: Any, **_: Any) -> Any:
        return func(*a)

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]
    from core.config import Settings
    from service.main import create_app

    app = create_app(Settings())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    profiler = cProfile.Profile(time.thread_time)

    def drive() -> None:
        try:
            wait_up(url)
            for r in range(args.rounds):
                asyncio.run(batch(url, bodies_of(problems, args.episodes, f"round-{r}")))
        finally:
            server.should_exit = True

    # cProfile follows the thread that enables it: the server's (this one); the client
    # runs in a thread of its own, unprofiled
    async def serve() -> None:
        threading.Thread(target=drive, daemon=True).start()
        await server.serve()

    profiler.enable()
    asyncio.run(serve())
    profiler.disable()
    profiler.dump_stats(str(RESULTS / "api_cost.prof"))
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
