"""The engine alone, as bench/agentic.py's baselines: a bare `docker create` + `start` of as
many containers of the same task images as the batch opens episodes, all at once (the time
from the batch's start until each runs), and a bare `docker exec` of `bash -c 'echo …'`
round trip from as many actors as episodes act, at the same agent pace."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import docker
from agentic_host import container_memory, engine_cpu, mem_available, per_unit


@dataclass
class Bare:
    """Containers of the baseline, all carrying one label."""

    label_key: str
    label_value: str
    ids: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.label_key}={self.label_value}"


def start_all(bare: Bare, images: list[str], count: int) -> dict[str, object]:
    """`count` containers created and started at once (container i of image i mod k): the
    seconds from the start of it all until each was running, and the memory they hold."""
    api = docker.APIClient(timeout=900, max_pool_size=count + 8)
    available = mem_available()
    lock = threading.Lock()
    began = time.monotonic()

    def one(index: int) -> float:
        created = api.create_container(
            images[index % len(images)],
            command=["sleep", "infinity"],
            labels={bare.label_key: bare.label_value},
            host_config=api.create_host_config(network_mode="none"),
        )
        with lock:
            bare.ids.append(created["Id"])
        api.start(created["Id"])
        return time.monotonic() - began

    try:
        with ThreadPoolExecutor(count) as pool:
            running = list(pool.map(one, range(count)))
        held = sum(container_memory(c) for c in bare.ids)
        return {
            "running_s": running,
            "all_s": time.monotonic() - began,
            "memory_per_container": held / count,
            "available_drop_per_container": (available - mem_available()) / count,
        }
    finally:
        api.close()


def exec_round_trips(
    bare: Bare, actors: int, execs: int, seed: int
) -> tuple[list[float], dict[str, float]]:
    """`actors` of the baseline's containers, each running `execs` bare execs one every 1-3 s
    (random): the round trips, and the CPU per exec by component."""
    api = docker.APIClient(timeout=300, max_pool_size=actors + 8)
    chosen = bare.ids[:actors]
    trips: list[float] = []
    lock = threading.Lock()

    def actor(number: int, container: str) -> None:
        pace = random.Random(seed * 1000 + number)
        for step in range(execs):
            time.sleep(pace.uniform(1.0, 3.0))
            started = time.monotonic()
            exec_id = api.exec_create(container, ["bash", "-c", f"echo step-{step}"])["Id"]
            output = api.exec_start(exec_id)
            took = time.monotonic() - started
            if output != f"step-{step}\n".encode():
                raise RuntimeError(f"bare exec answered {output!r}")
            with lock:
                trips.append(took)

    try:
        before = engine_cpu(bare.label)
        with ThreadPoolExecutor(len(chosen)) as pool:
            for future in [pool.submit(actor, n, c) for n, c in enumerate(chosen)]:
                future.result()
        after = engine_cpu(bare.label)
    finally:
        api.close()
    return trips, per_unit(before, after, len(trips))


def remove_all(bare: Bare) -> float:
    """Remove the baseline's containers (force, at once); the seconds it took."""
    api = docker.APIClient(timeout=900, max_pool_size=len(bare.ids) + 8)
    began = time.monotonic()
    try:
        with ThreadPoolExecutor(max(min(len(bare.ids), 64), 1)) as pool:
            list(pool.map(lambda c: api.remove_container(c, force=True), bare.ids))
    finally:
        api.close()
    bare.ids.clear()
    return time.monotonic() - began
