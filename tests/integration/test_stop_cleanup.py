"""A stopped service leaves nothing of its own behind: `proctor run` on free ports and a
Redis database of its own, a few episodes (one-shot in a pooled sandbox and in a container
of its own, an interactive one left open), SIGTERM to its PID as `make run`'s Ctrl-C or a
process manager sends it; then no container and no network labelled with its deployment
remains on the engine (its honeypot included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from core.config import Settings
from tests.conftest import (
    REPO_ROOT,
    claimed_database,
    free_port,
    service_env,
    wait_ready,
)
from tests.e2e.helpers import episode
from workers.sandbox.engine import DEPLOYMENT_LABEL

ADD = "def add(a, b):\n    return a + b\n"
STOP_S = 90  # a worker finishes the job it holds before it stops


def leftovers(deployment: str) -> dict[str, list[str]]:
    """The deployment's containers (by label, and its honeypot by name) and networks."""
    label = f"label={DEPLOYMENT_LABEL}={deployment}"
    honeypot = f"name=^proctor-honeypot-{deployment}$"
    found = {}
    for kind, filters, listing in (
        ("containers", [label], ["docker", "ps", "-a"]),
        ("honeypot", [honeypot], ["docker", "ps", "-a"]),
        ("networks", [label], ["docker", "network", "ls"]),
    ):
        command = [*listing, *(f for x in filters for f in ("--filter", x))]
        out = subprocess.run(
            [*command, "--format", "{{.Names}}" if "ps" in listing else "{{.Name}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found[kind] = out.split()
    return found


@pytest.mark.docker
@pytest.mark.redis
def test_sigterm_leaves_no_container_or_network(docker_ready: None) -> None:
    with claimed_database() as redis_url:
        deployment = Settings(redis_url=redis_url).deployment_id
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "proctor.cli", "run"],
            # a honeypot network of its own: the default name is shared by every deployment
            # on the host, and one another's container still uses is rightly left behind
            env=service_env(
                redis_url,
                port,
                PROCTOR_WORKER_CONCURRENCY="2",
                PROCTOR_HONEYPOT_NETWORK=f"proctor-sandbox-{deployment}",
            ),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process, 120)
            with httpx.Client(base_url=url, timeout=150) as http:
                for isolation in ("pooled", "container"):
                    body = episode(ADD)
                    body["task"]["isolation"] = isolation
                    result = http.post("/v1/episodes", params={"wait": 120}, json=body).json()
                    assert result["verdict"] == "passed", json.dumps(result)[:2000]
                # an interactive episode, left open: its container is the worker's to remove
                opened = http.post(
                    "/v1/episodes", json={"mode": "interactive", "task": episode(ADD)["task"]}
                )
                assert opened.status_code == 201, opened.text
                acted = http.post(
                    f"/v1/episodes/{opened.json()['id']}/actions",
                    json={"type": "bash", "command": "echo hi > note.txt"},
                )
                assert acted.status_code == 200, acted.text
                live = leftovers(deployment)
                # the test sees what it looks for
                assert live["containers"] and live["honeypot"] and live["networks"], live
            os.kill(process.pid, signal.SIGTERM)
            assert process.wait(timeout=STOP_S) == 0
            assert leftovers(deployment) == {"containers": [], "honeypot": [], "networks": []}
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
