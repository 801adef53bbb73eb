"""The submit path's image check against real Redis, with the store calls a worker makes."""

from __future__ import annotations

import time

import pytest
import redis

from core.config import Settings
from core.defaults import IMAGES
from core.store import EpisodeStore
from proctor.models import EpisodeCreate
from service import images
from service.errors import ServiceUnavailable
from service.images import ImageCheck

REQUEST = EpisodeCreate.model_validate(
    {
        "task": {"image": "python", "tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": ""}},
    }
)
WORKER = "host.1.2.images"


@pytest.fixture
def store(quiet_redis: redis.Redis) -> EpisodeStore:
    """No live worker but the one a test starts."""
    return EpisodeStore(quiet_redis)


def worker_reports(store: EpisodeStore, python: str | None) -> None:
    store.heartbeat(WORKER, host="host")
    store.publish_images(WORKER, {**dict.fromkeys(IMAGES), "python": python})


@pytest.mark.redis
def test_an_image_no_live_worker_can_run_is_refused_with_why(store: EpisodeStore) -> None:
    check = ImageCheck(Settings(), store)
    check.check([REQUEST])  # no live worker: nothing known, and nothing kept
    worker_reports(store, "inspect image: image not found")
    with pytest.raises(ServiceUnavailable) as refused:
        check.check([REQUEST])
    assert "'python'" in refused.value.message and "image not found" in refused.value.message
    worker_reports(store, None)  # a no is asked afresh: back at once
    check.check([REQUEST])


@pytest.mark.redis
def test_a_runnable_image_is_kept_for_a_while(
    store: EpisodeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "HOLD_S", 0.5)
    check = ImageCheck(Settings(), store)
    worker_reports(store, None)
    check.check([REQUEST])
    worker_reports(store, "inspect image: image not found")
    check.check([REQUEST])  # kept: no Redis read
    time.sleep(0.6)
    with pytest.raises(ServiceUnavailable):
        check.check([REQUEST])
