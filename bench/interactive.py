"""Interactive episodes: time to a ready sandbox (warm pool vs cold) and step round trip,
beside bare Docker doing the same, measured in one run.

    python bench/interactive.py [--episodes 10] [--steps 30]

- ready:  POST /v1/episodes (mode interactive) until 201 with the first observation,
          with the warm pool (PROCTOR_POOL_SIZE=2) and without (0); baseline: a bare
          `docker create` + `start` of the same image through the SDK.
- step:   POST /v1/episodes/{id}/actions of `echo hi` until its observation; baseline:
          a bare SDK exec of `bash -c 'echo hi'` in a running container.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import docker
import httpx
from harness import machine, service, summary, table, write

IMAGE = "proctor/sandbox-python:latest"
TASK = {
    "image": "python",
    "files": {"main.py": "print('hello')\n"},
    "tests": {"files": {"test_main.py": "def test_ok():\n    assert True\n"}},
}


def proctor_ready_and_steps(url: str, episodes: int, steps: int) -> tuple[list[float], list[float]]:
    ready: list[float] = []
    step_times: list[float] = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for i in range(episodes):
            started = time.monotonic()
            response = client.post("/v1/episodes", json={"mode": "interactive", "task": TASK})
            ready.append(time.monotonic() - started)
            assert response.status_code == 201, response.text
            episode_id = response.json()["id"]
            for _ in range(steps if i == 0 else 0):
                started = time.monotonic()
                answer = client.post(
                    f"/v1/episodes/{episode_id}/actions",
                    json={"type": "bash", "command": "echo hi"},
                )
                step_times.append(time.monotonic() - started)
                assert answer.json()["observation"]["output"] == "hi\n"
            client.post(f"/v1/episodes/{episode_id}/finish")
            time.sleep(0.5)  # let the pool refill, as between a trainer's episodes
    return ready, step_times


def docker_baselines(episodes: int, steps: int) -> tuple[list[float], list[float]]:
    client = docker.from_env()
    api = client.api
    starts: list[float] = []
    for _ in range(episodes):
        started = time.monotonic()
        container = api.create_container(
            IMAGE,
            command=["sleep", "infinity"],
            host_config=api.create_host_config(network_mode="none"),
        )
        api.start(container)
        starts.append(time.monotonic() - started)
        api.remove_container(container, force=True)
    container = api.create_container(
        IMAGE,
        command=["sleep", "infinity"],
        host_config=api.create_host_config(network_mode="none"),
    )
    api.start(container)
    execs: list[float] = []
    try:
        for _ in range(steps):
            started = time.monotonic()
            exec_id = api.exec_create(container, ["bash", "-c", "echo hi"])["Id"]
            output = api.exec_start(exec_id)
            execs.append(time.monotonic() - started)
            assert output == b"hi\n"
    finally:
        api.remove_container(container, force=True)
        client.close()
    return starts, execs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []

    starts, execs = docker_baselines(args.episodes, args.steps)
    rows.append(
        {
            "measure": "ready",
            "system": "docker create+start (SDK)",
            "n": len(starts),
            **summary(starts),
        }
    )
    for pool in ("2", "0"):
        with service(worker_concurrency="2", pool_size=pool) as url:
            ready, steps = proctor_ready_and_steps(url, args.episodes, args.steps)
        label = "warm pool" if pool != "0" else "no pool (cold)"
        rows.append(
            {"measure": "ready", "system": f"proctor, {label}", "n": len(ready), **summary(ready)}
        )
        if pool != "0":
            step_row = {
                "measure": "step",
                "system": "proctor action (HTTP→RQ→exec)",
                "n": len(steps),
                **summary(steps),
            }
    rows.append(
        {"measure": "step", "system": "docker exec (SDK)", "n": len(execs), **summary(execs)}
    )
    rows.append(step_row)

    print(table(rows, ["measure", "system", "n", "p50_s", "p95_s", "mean_s"]))
    print(f"\nwritten to {write('interactive', {'machine': machine(), 'rows': rows})}")


if __name__ == "__main__":
    main()
