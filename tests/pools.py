"""Waiting for a running service's warm pools: a burst sent a moment after the workers came
up finds its sandboxes still starting (the tests and the benchmarks measure the service
once they are full, as a trainer's later steps find it)."""

from __future__ import annotations

import subprocess
import time

from core.config import Settings
from workers.sandbox.engine import DEPLOYMENT_LABEL, POOL_LABEL


def wait_for_warm_pools(redis_url: str, *, settle_s: float = 3.0, timeout_s: float = 120) -> int:
    """Wait until the idle pool containers of the service on `redis_url` have not grown in
    number for `settle_s`; how many there are."""
    deployment = Settings(redis_url=redis_url).deployment_id
    labels = [f"label={DEPLOYMENT_LABEL}={deployment}", f"label={POOL_LABEL}"]
    command = ["docker", "ps", "-q", *(f for label in labels for f in ("--filter", label))]
    count, changed, deadline = -1, time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = len(subprocess.run(command, capture_output=True, text=True).stdout.split())
        if now != count:
            count, changed = now, time.monotonic()
        elif time.monotonic() - changed >= settle_s:
            break
        time.sleep(0.5)
    return count
