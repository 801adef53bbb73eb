"""An image removed from the engine after the workers started: submissions for it are
turned away (503 naming it) and /readyz goes red, instead of queueing work nobody runs."""

from __future__ import annotations

import uuid
from contextlib import suppress

import docker
import httpx
import pytest

from tests.conftest import claimed_database, running_service, wait_until
from tests.e2e.helpers import episode

pytestmark = pytest.mark.usefixtures("docker_ready")

ADD = "def add(a, b):\n    return a + b\n"
BASE = "proctor/sandbox-python:latest"


def test_an_image_that_vanishes_after_start_is_refused_and_turns_readyz_red() -> None:
    client = docker.from_env()
    alias = f"proctor/sandbox-python:vanish-{uuid.uuid4().hex[:8]}"
    client.images.get(BASE).tag(alias)
    try:
        with (
            claimed_database() as redis_url,
            running_service(redis_url, PROCTOR_IMAGES=f"python={BASE},vanishing={alias}") as url,
        ):
            request = episode(ADD)
            request["task"]["image"] = "vanishing"
            assert httpx.post(f"{url}/v1/episodes", json=request).status_code == 202
            client.images.remove(alias)

            def refused() -> bool:
                return httpx.post(f"{url}/v1/episodes", json=request).status_code == 503

            assert wait_until(refused, 30), "submissions for a vanished image still queue"
            answer = httpx.post(f"{url}/v1/episodes", json=request)
            assert "'vanishing'" in answer.json()["error"]["message"]
            ready = httpx.get(f"{url}/readyz")
            assert ready.status_code == 503
            # the other image is still served
            other = httpx.post(f"{url}/v1/episodes", json=episode(ADD))
            assert other.status_code == 202, other.text
    finally:
        with suppress(docker.errors.ImageNotFound):
            client.images.remove(alias)
        client.close()
