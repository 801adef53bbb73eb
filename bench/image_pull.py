"""Task images by reference: what a cold pull, a warm use and many workers asking at once
cost through the host's pull cache, beside the engine's own `docker pull` of the same
image, measured in one run against a registry on 127.0.0.1 (Debian's docker-registry).

    python bench/image_pull.py [--layer-mb 32] [--waiters 8] [--rounds 3]

Each round pushes a fresh image (the sandbox image plus one random layer of --layer-mb,
so only that layer is new to the host, as for a task image on a shared base) under two
names; the engine pulls one (`docker pull`, the baseline) and the cache the other
(`TaskImages.ensure`). Then a warm `ensure` of it, and --waiters workers asking at once
for a third fresh name (one pull, the others wait on it). Loopback registry: the figures
are the engine's and ours, not a network's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from contextlib import suppress
from pathlib import Path

import docker
import redis
from harness import BENCH_REDIS, claimed, machine, table, write  # puts the repo on the path

from tests.registry import BASE, build, push, running_registry
from workers.sandbox.docker import Engine
from workers.sandbox.images import TaskImages


def fresh_image(client: docker.DockerClient, layer_mb: int) -> str:
    return build(
        client,
        f"FROM {BASE}\nCOPY blob /blob\n",
        {"blob": os.urandom(layer_mb << 20)},
    )


def measure(
    engine: Engine,
    db: redis.Redis,
    url: str,
    host: str,
    refs: list[str],
    rows: dict[str, list[float]],
    pulls: list[int],
    waiters: int,
    round_: int,
) -> None:
    def cache() -> TaskImages:
        return TaskImages(engine, db, host=host, keep=[BASE], timeout_s=600, budget_gb=50)

    def engine_pull() -> None:
        started = time.perf_counter()
        subprocess.run(["docker", "pull", "-q", refs[0]], check=True, capture_output=True)
        rows["docker pull (engine)"].append(time.perf_counter() - started)

    def cold() -> None:
        started = time.perf_counter()
        assert cache().ensure(refs[1])
        rows["cold ensure (pull)"].append(time.perf_counter() - started)

    # alternate which goes first, so drift on a shared host weighs on both alike
    for step in (engine_pull, cold) if round_ % 2 == 0 else (cold, engine_pull):
        step()
    started = time.perf_counter()
    assert not cache().ensure(refs[1])
    rows["warm ensure"].append(time.perf_counter() - started)
    barrier = threading.Barrier(waiters)
    done: list[float] = []

    def worker() -> None:
        own = Engine(worker="w", host="bench", deployment="bench-pull")
        with redis.Redis.from_url(url) as mine:
            images = TaskImages(own, mine, host=host, keep=[BASE], timeout_s=600, budget_gb=50)
            barrier.wait()
            begun = time.perf_counter()
            images.ensure(refs[2])
            done.append(time.perf_counter() - begun)

    threads = [threading.Thread(target=worker) for _ in range(waiters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows[f"{waiters} at once (1 pull)"].append(max(done))
    pulls.append(cache().pulls(refs[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer-mb", type=int, default=32)
    parser.add_argument("--waiters", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env()
    rows: dict[str, list[float]] = {
        "docker pull (engine)": [],
        "cold ensure (pull)": [],
        "warm ensure": [],
        f"{args.waiters} at once (1 pull)": [],
    }
    pulls: list[int] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_registry(Path(tmp)) as registry,
        claimed(BENCH_REDIS) as url,
        redis.Redis.from_url(url) as db,
    ):
        engine = Engine(worker="bench", host="bench", deployment="bench-pull", holder_image=BASE)
        for round_ in range(args.rounds):
            # one fresh image per name: no layer of one is on the host when another is pulled
            refs = [registry.ref(f"bench/{n}", uuid.uuid4().hex[:8]) for n in "abc"]
            for ref in refs:
                local = fresh_image(client, args.layer_mb)
                try:
                    push(client, local, ref)
                finally:
                    client.images.remove(local, force=True)
            host = f"bench-{uuid.uuid4().hex[:8]}"
            try:
                measure(engine, db, url, host, refs, rows, pulls, args.waiters, round_)
            finally:
                for ref in refs:
                    with suppress(docker.errors.ImageNotFound):
                        client.images.remove(ref, force=True)
    summary = [
        {
            "what": name,
            "median_s": round(statistics.median(values), 4),
            "min_s": round(min(values), 4),
            "max_s": round(max(values), 4),
        }
        for name, values in rows.items()
    ]
    print(f"layer {args.layer_mb} MB, {args.rounds} rounds, pulls for the shared image: {pulls}")
    print(table(summary, ["what", "median_s", "min_s", "max_s"]))
    write("image_pull", {"machine": machine(), "args": vars(args), "rows": summary})


if __name__ == "__main__":
    main()
