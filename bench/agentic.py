"""Scale of an RL batch (issue 33), beside the engine alone, in one run.

Interactive episodes on task images from a registry, opened at once as a trainer opens a
batch and acting at agent pace; the engine doing the same alone as the baseline.

    python bench/agentic.py [--episodes 256] [--images 8] [--acting 64] [--echoes 4]

1. Task images: --images small repositories (a bug at the base commit, the fix later, a
   hidden test) built by `proctor images build-task` and pushed to a registry on 127.0.0.1
   (Debian's docker-registry, started and stopped here); nothing of them is on the host.
2. A private deployment (`proctor run` on a redis-server of its own, so its Redis CPU is
   this run's alone; PROCTOR_IMAGE_ALLOW for the registry). Start times, one episode at a
   time: half the images cold (pull + seal + start), the other half prefetched
   (`POST /v1/images/prefetch`) then started (warm image, first seal), and each again (the
   sealed copy cached).
3. Baselines: a bare `docker create` + `start` of --episodes containers of the same images
   all at once; a bare `docker exec` round trip from --acting of them, one every 1-3 s.
4. The batch: --episodes episodes (image i mod --images, `task.repo` baked at /testbed)
   opened at once; time to ready (201 with the first observation). Then --acting of them
   run --echoes `echo` actions each, one every 1-3 s (random): round trips, and the CPU one
   action costs by component. Then every episode acts as an agent that ends: an `echo`, the
   honest fix (even samples) or a no-op `ls` (odd), the finish — actions/s sustained, and
   every fix must be rewarded 1.0, every no-op 0.

The host is shared (other engineers' work runs on it): the load average is printed with
each phase, and the CPU no component claims is reported as such, not spread over them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import httpx
from agentic_bare import Bare, exec_round_trips, remove_all, start_all
from agentic_host import Stack, load, per_unit, sweep
from agentic_report import report, summarize
from agentic_tasks import TaskImage, build
from harness import PIDS, machine, service_on, write
from neighbours import PrivateRedis

from core.config import Settings
from tests.registry import running_registry
from workers.sandbox.engine import DEPLOYMENT_LABEL

T = TypeVar("T")
BENCH_LABEL = "org.proctor.bench"


def _interrupted(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def progress(phase: str) -> str:
    """The load average now, and a line on stderr: a full run takes a while."""
    now = load()
    print(f"{time.strftime('%H:%M:%S')} {phase} (load {now})", file=sys.stderr, flush=True)
    return now


@dataclass
class Trouble:
    """What went wrong on the client's side: refusals by path kind and message, and
    answers that were not what the action asked for."""

    refusals: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def refused(self, path: str, answer: httpx.Response) -> None:
        kind = path.rsplit("/", 1)[-1] if "/v1/episodes/" in path else path
        try:
            message = str(answer.json()["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = answer.text
        # episode ids and numbers vary: the message's shape is what counts
        shape = re.sub(r"ep_[0-9a-f]+|\d+(\.\d+)?", "#", message)[:120]
        self.refusals[f"{kind} {answer.status_code}: {shape}"] += 1


class Client:
    """A trainer's side of the batch: HTTP to the service, timed."""

    def __init__(self, url: str, connections: int, trouble: Trouble) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.http = httpx.AsyncClient(base_url=url, timeout=900, limits=limits)
        self.trouble = trouble

    async def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        """POST, again after a 429's Retry-After (the queue bound), as a trainer does."""
        while True:
            answer = await self.http.post(path, json=body)
            if answer.status_code != 429:
                return answer
            self.trouble.refused(path, answer)
            await asyncio.sleep(float(answer.headers.get("retry-after", "1")))

    async def open(self, body: dict[str, Any], began: float) -> tuple[str, float]:
        """Open an episode; (id, seconds from `began` until it was ready)."""
        answer = await self.post("/v1/episodes", body)
        if answer.status_code not in (200, 201, 202):
            raise RuntimeError(f"open: {answer.status_code} {answer.text[:500]}")
        episode = answer.json()
        while episode["status"] in ("queued", "starting"):  # a start longer than the API waits
            await asyncio.sleep(0.5)
            episode = (await self.http.get(f"/v1/episodes/{episode['id']}")).json()
        if episode["status"] != "running":
            raise RuntimeError(f"episode {episode['id']} ended while starting: {episode}")
        return episode["id"], time.monotonic() - began

    async def act(self, episode: str, action: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(round trip, observation); a refusal (503: no worker answered in time, 409) is
        counted, its observation None, and the agent goes on as a trainer's would."""
        started = time.monotonic()
        path = f"/v1/episodes/{episode}/actions"
        answer = await self.post(path, action)
        took = time.monotonic() - started
        if answer.status_code in (409, 503):
            self.trouble.refused(path, answer)
            return took, {"refused": answer.status_code}
        if answer.status_code != 200:
            raise RuntimeError(f"action: {answer.status_code} {answer.text[:500]}")
        observation: dict[str, Any] = answer.json()["observation"]
        return took, observation

    async def finish(self, episode: str) -> tuple[float, dict[str, Any]]:
        """(seconds until the result, the result); a finish answered 503 (no worker replied
        in time) is still queued: its result is waited for."""
        started = time.monotonic()
        path = f"/v1/episodes/{episode}/finish"
        answer = await self.post(path)
        if answer.status_code == 503:
            self.trouble.refused(path, answer)
            result = answer.json()
            while result.get("status") not in ("completed", "failed", "cancelled"):
                answer = await self.http.get(f"/v1/episodes/{episode}", params={"wait": 120})
                result = answer.json()
        elif answer.status_code != 200:
            raise RuntimeError(f"finish: {answer.status_code} {answer.text[:500]}")
        else:
            result = answer.json()
        return time.monotonic() - started, result

    async def prefetch(self, refs: list[str]) -> float:
        started = time.monotonic()
        answer = await self.post("/v1/images/prefetch", {"images": refs})
        if answer.status_code != 202:
            raise RuntimeError(f"prefetch: {answer.status_code} {answer.text[:500]}")
        progress = answer.json()
        while not progress["complete"]:
            await asyncio.sleep(0.2)
            progress = (await self.http.get(f"/v1/images/prefetch/{progress['id']}")).json()
        if progress["counts"].get("pulled", 0) + progress["counts"].get("present", 0) < len(refs):
            raise RuntimeError(f"prefetch: {progress}")
        return time.monotonic() - started

    async def close(self) -> None:
        await self.http.aclose()


async def with_client(
    url: str,
    episodes: int,
    trouble: Trouble,
    work: Callable[..., Awaitable[T]],
    *args: Any,
) -> T:
    """`work(client, *args)` with a client of this event loop's, closed after."""
    client = Client(url, episodes + 16, trouble)
    try:
        return await work(client, *args)
    finally:
        await client.close()


async def start_times(client: Client, images: list[TaskImage]) -> dict[str, list[float]]:
    """One episode at a time: cold (half the images), prefetched (the other half), then each
    image's next episode (its sealed copy cached)."""
    found: dict[str, list[float]] = {
        "cold: pull + seal + start": [],
        "prefetch (pull) of the other images": [],
        "warm image cache: seal + start": [],
        "sealed cache: start": [],
    }

    async def one(image: TaskImage, what: str) -> None:
        began = time.monotonic()
        episode, ready = await client.open(image.episode(), began)
        found[what].append(ready)
        await client.finish(episode)
        await asyncio.sleep(1.0)

    cold, warm = images[::2], images[1::2]
    for image in cold:
        await one(image, "cold: pull + seal + start")
        await one(image, "sealed cache: start")
    if warm:
        found["prefetch (pull) of the other images"].append(
            await client.prefetch([i.ref for i in warm])
        )
    for image in warm:
        await one(image, "warm image cache: seal + start")
        await one(image, "sealed cache: start")
    return found


async def batch(
    client: Client, stack: Stack, images: list[TaskImage], args: argparse.Namespace
) -> dict[str, Any]:
    """The RL batch: open all at once, some act, then all act and end."""
    count, kinds = args.episodes, len(images)
    task = [images[i % kinds] for i in range(count)]
    fixes = [(i // kinds) % 2 == 0 for i in range(count)]  # half of each image's samples
    memory_before = stack.memory()
    began = time.monotonic()
    opened = await asyncio.gather(*(client.open(t.episode(), began) for t in task))
    open_s = time.monotonic() - began
    ids = [episode for episode, _ in opened]
    ready = [seconds for _, seconds in opened]
    await asyncio.sleep(2.0)  # what the start-up left running settles
    memory_after = stack.memory()
    load_open = progress(f"{count} episodes open")

    # --acting episodes act at agent pace; the rest stay open, idle
    acting = ids[: args.acting]
    trips: list[float] = []

    async def echoes(number: int, episode: str) -> None:
        pace = random.Random(args.seed * 1000 + number)
        for step in range(args.echoes):
            await asyncio.sleep(pace.uniform(1.0, 3.0))
            took, seen = await client.act(episode, {"type": "bash", "command": f"echo step-{step}"})
            if "refused" in seen:
                continue
            if seen.get("output") != f"step-{step}\n":
                client.trouble.errors.append(f"{episode}: echo answered {seen}")
            trips.append(took)

    cpu_before = stack.cpu()
    acted = time.monotonic()
    await asyncio.gather(*(echoes(n, e) for n, e in enumerate(acting)))
    act_s = time.monotonic() - acted
    cpu_per_action = per_unit(cpu_before, stack.cpu(), len(trips))
    load_act = progress(f"{len(acting)} acting: {len(trips)} actions")

    # every episode: an echo, the fix or a no-op, the finish
    steps: list[float] = []
    finishes: list[float] = []
    outcomes: list[tuple[bool, Any, str]] = []
    refused: list[int] = []  # episodes whose fix or no-op was refused

    async def agent(number: int, episode: str) -> None:
        pace = random.Random(args.seed * 7919 + number)
        await asyncio.sleep(pace.uniform(1.0, 3.0))
        took, seen = await client.act(episode, {"type": "bash", "command": "echo looking"})
        if "refused" not in seen:
            steps.append(took)
            if seen.get("output") != "looking\n":
                client.trouble.errors.append(f"{episode}: echo answered {seen}")
        await asyncio.sleep(pace.uniform(1.0, 3.0))
        fix = fixes[number]
        action = task[number].fix() if fix else {"type": "bash", "command": "ls"}
        took, seen = await client.act(episode, action)
        if "refused" in seen:  # it may still run, or not: its reward says nothing
            refused.append(number)
        else:
            steps.append(took)
        await asyncio.sleep(pace.uniform(1.0, 3.0))
        took, result = await client.finish(episode)
        finishes.append(took)
        if "refused" not in seen:
            outcomes.append((fix, result.get("reward"), str(result.get("verdict"))))

    ended = time.monotonic()
    cpu_before = stack.cpu()
    await asyncio.gather(*(agent(n, e) for n, e in enumerate(ids)))
    all_s = time.monotonic() - ended
    cpu_per_episode = per_unit(cpu_before, stack.cpu(), count)
    fixed = [o for o in outcomes if o[0]]
    noops = [o for o in outcomes if not o[0]]
    return {
        "ready_s": ready,
        "open_all_s": open_s,
        "memory_before": memory_before,
        "memory_after": memory_after,
        "load_open": load_open,
        "action_s": trips,
        "act_phase_s": act_s,
        "cpu_ms_per_action": cpu_per_action,
        "load_act": load_act,
        "steps_s": steps,
        "finish_s": finishes,
        "all_phase_s": all_s,
        "cpu_ms_per_episode_end": cpu_per_episode,
        "load_all": progress("every episode ended"),
        "fix_rewarded_1": sum(1 for o in fixed if o[1] == 1.0),
        "fixes": len(fixed),
        "noop_rewarded_0": sum(1 for o in noops if o[1] == 0.0),
        "noops": len(noops),
        "fix_or_noop_refused": len(refused),
        "mismatches": [
            {"fix": f, "reward": r, "verdict": v}
            for f, r, v in outcomes
            if r != (1.0 if f else 0.0)
        ],
    }


@contextmanager
def deployment(
    registry_host: str, run: str, args: argparse.Namespace
) -> Iterator[tuple[str, Stack]]:
    """A private service on a private Redis, allowed the registry's task images; every
    container and network of its label swept when it stops."""
    private = PrivateRedis()
    label = f"{DEPLOYMENT_LABEL}={Settings(redis_url=private.url).deployment_id}"
    settings = {
        "image_allow": f"{registry_host}/agentic/*",
        "pull_timeout_s": "600",
        "interactive_idle_s": "3600",  # the batch's first episodes wait for its last
        "honeypot_network": f"proctor-agentic-{run}",  # the default name is every deployment's
    }
    if args.worker_concurrency:
        settings["worker_concurrency"] = args.worker_concurrency
    if args.network:
        settings["network"] = args.network
    try:
        with service_on(private.url, **settings) as url:
            yield url, Stack(PIDS[url], private.process.pid, private.url, label)
    finally:
        swept = sweep(label)
        if swept:
            print(f"swept {swept} containers of the deployment")
        private.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--images", type=int, default=8, choices=range(1, 9))
    parser.add_argument("--acting", type=int, default=64, help="episodes acting at once")
    parser.add_argument("--echoes", type=int, default=4, help="echo actions of each of those")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--network",
        choices=("auto", "none"),
        help="PROCTOR_NETWORK (default auto: each sandbox on a network of its own whose only "
        "peer is the honeypot; none: no network, as the bare baseline)",
    )
    parser.add_argument(
        "--worker-concurrency", help="PROCTOR_WORKER_CONCURRENCY (default: the deployment's)"
    )
    args = parser.parse_args()
    args.acting = min(args.acting, args.episodes)
    signal.signal(signal.SIGTERM, _interrupted)
    run = uuid.uuid4().hex[:8]
    bare = Bare(BENCH_LABEL, f"agentic-{run}")
    loads = {"start": load()}
    trouble = Trouble()
    with ExitStack() as stack:
        stack.callback(sweep, bare.label)
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentic-")))
        registry = stack.enter_context(running_registry(scratch))
        images = [build(registry.host, i, run, scratch) for i in range(args.images)]
        for image in images:
            stack.callback(subprocess.run, ["docker", "rmi", "-f", image.ref], capture_output=True)
        loads["images built"] = progress("images built")
        url, deployed = stack.enter_context(deployment(registry.host, run, args))
        starts = asyncio.run(with_client(url, args.episodes, trouble, start_times, images))
        loads["start times"] = progress("start times")

        started = start_all(bare, [image.ref for image in images], args.episodes)
        loads["bare start"] = progress("bare start")
        exec_trips, exec_cpu = exec_round_trips(bare, args.acting, args.echoes, args.seed)
        loads["bare exec"] = progress("bare exec")
        removed_s = remove_all(bare)

        measured = asyncio.run(
            with_client(url, args.episodes, trouble, batch, deployed, images, args)
        )
        loads.update(
            {
                "batch open": measured["load_open"],
                f"{args.acting} acting": measured["load_act"],
                "all acting": measured["load_all"],
            }
        )
    found = summarize(args, images, starts, started, exec_trips, exec_cpu, removed_s, measured)
    found["loads"] = loads
    found["errors"] = trouble.errors
    found["refusals"] = dict(trouble.refusals)
    report(args, found)
    path = write("agentic", {"machine": machine(), "args": vars(args), **found})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
