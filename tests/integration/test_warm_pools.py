"""Warm pools sized by demand within the host's ceiling, on a real service: mixed traffic
(a spec per memory limit, in both isolations) leaves no more idle sandboxes than the
ceiling once it has quieted, where every worker process once kept `pool_size` of every spec
it had seen."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import claimed_database, running_service
from tests.e2e.helpers import episode
from tests.pools import wait_for_warm_pools

ADD = "def add(a, b):\n    return a + b\n"
CEILING = 3


@pytest.mark.docker
@pytest.mark.redis
def test_mixed_traffic_stays_within_the_hosts_ceiling(docker_ready: None) -> None:
    with (
        claimed_database() as redis_url,
        running_service(
            redis_url,
            PROCTOR_WORKER_CONCURRENCY="2",
            PROCTOR_POOL_SIZE="2",
            PROCTOR_POOL_HOST_MAX=str(CEILING),
        ) as url,
        httpx.Client(base_url=url, timeout=180) as http,
    ):
        assert wait_for_warm_pools(redis_url) <= CEILING  # prewarmed: the floor
        for memory_mb in (256, 320, 384, 448):
            for isolation in ("pooled", "container"):
                body = episode(ADD, memory_mb=memory_mb)
                body["task"]["isolation"] = isolation
                result = http.post("/v1/episodes", params={"wait": 120}, json=body).json()
                assert result["verdict"] == "passed", result
        # a pooled sandbox back from its episode is kept past the ceiling while its spec is
        # in use (workers/sandbox/demand.py: Budget.count_back); once traffic has quieted,
        # the janitor's sweep trims each spec back to what its demand needs
        deadline = time.monotonic() + 90
        while wait_for_warm_pools(redis_url) > CEILING and time.monotonic() < deadline:
            time.sleep(2)
        assert wait_for_warm_pools(redis_url) <= CEILING
