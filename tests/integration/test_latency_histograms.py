"""The latency histograms as operators read them, from `proctor serve` on a real Redis, for
episodes written through the store as workers write them: every observation in the bucket
it fell in (integer bounds too), and the web page's quantiles read off the same counts."""

from __future__ import annotations

import math
import re

import httpx
import pytest
import redis

from core import results
from core.store import EpisodeStore
from proctor.models import EpisodeCreate, EpisodeStatus, Timings, Verdict
from tests.conftest import emptied, running_api

REQUEST = {"task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}, "solution": {}}
# one episode in each bucket up to the last, two past it: bounds 0.05 … 300
SECONDS = (0.02, 0.07, 0.2, 0.4, 0.7, 2.0, 3.0, 7.0, 20.0, 45.0, 200.0, 400.0, 900.0)
SAMPLE = re.compile(
    r'^proctor_episode_total_seconds_(bucket|sum|count)(?:\{le="([^"]+)"\})? (\S+)$'
)


def ended(store: EpisodeStore, total_s: float) -> None:
    request = EpisodeCreate.model_validate(REQUEST)
    admission = store.create([request], dedup_keys=[None], max_queued=10_000, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    result = results.ended(
        record,
        EpisodeStatus.completed,
        Verdict.passed,
        reward=1.0,
        passed=True,
        timings=Timings(total_s=total_s),
    )
    assert store.finish(result)


def histogram(text: str) -> tuple[list[tuple[float, float]], float, float]:
    """The total-time histogram's cumulative buckets, sum and count from an exposition."""
    buckets: list[tuple[float, float]] = []
    total = count = math.nan
    for line in text.splitlines():
        if (m := SAMPLE.match(line)) is None:
            continue
        kind, le, value = m.groups()
        if kind == "bucket":
            buckets.append((float(le), float(value)))
        elif kind == "sum":
            total = float(value)
        else:
            count = float(value)
    return buckets, total, count


def page_quantiles(html: str) -> list[str]:
    return re.findall(r"<b>([^<]*)</b><span>p(?:50|95) end to end", html)


@pytest.mark.redis
def test_histograms_and_quantiles(redis_url: str, redis_client: redis.Redis) -> None:
    emptied(redis_client)
    store = EpisodeStore(redis_client)
    with running_api(redis_url) as url:
        for _ in range(4):
            ended(store, 0.5)
        page = httpx.get(f"{url}/ui", timeout=10).text
        # half-second episodes: both quantiles are the 0.5 s bucket's bound, not the last's
        assert page_quantiles(page) == ["500 ms", "500 ms"]

        emptied(redis_client)
        for seconds in SECONDS:
            ended(store, seconds)
        text = httpx.get(f"{url}/metrics", timeout=10).text
        page = httpx.get(f"{url}/ui", timeout=10).text
    buckets, total, count = histogram(text)
    assert count == len(SECONDS) and total == pytest.approx(sum(SECONDS))
    # each observation is at least its bucket's lower edge: so is their sum
    lower_edges, previous_le, previous_n = 0.0, 0.0, 0.0
    for le, n in buckets:
        lower_edges += (n - previous_n) * previous_le
        previous_le, previous_n = le, n
    assert total >= lower_edges
    assert [n for _, n in buckets] == [*range(1, len(SECONDS) - 1), len(SECONDS)]
    assert page_quantiles(page) == ["5.00 s", "300.00 s"]  # 3 s is the 7th of 13; 400 s past
