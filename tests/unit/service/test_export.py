"""The export against a real Redis: the catalog's episodes as rows, filtered, in pages."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq  # the server's extra: a missing pyarrow fails, never skips
import pytest
import redis

from core import results
from core.store import EpisodeStore
from proctor.models import EpisodeCreate, EpisodeExport, EpisodeStatus, Verdict
from service import export
from service.catalog import InvalidFilter
from tests.conftest import emptied

REQUEST = {"task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}, "solution": {}}
TTL_S = 3600


def ended(store: EpisodeStore, verdict: Verdict, n: int) -> str:
    request = EpisodeCreate.model_validate({**REQUEST, "metadata": {"n": str(n)}})
    admission = store.create([request], dedup_keys=[None], max_queued=10_000, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    reward = 1.0 if verdict is Verdict.passed else 0.0
    result = results.ended(
        record, EpisodeStatus.completed, verdict, reward=reward, passed=reward == 1.0
    )
    assert store.finish(result)
    return record.id


@pytest.fixture
def stored(redis_client: redis.Redis) -> dict[str, Verdict]:
    emptied(redis_client)
    store = EpisodeStore(redis_client, result_ttl_s=TTL_S)
    verdicts = [Verdict.passed, Verdict.failed, Verdict.cheat]
    return {ended(store, verdicts[i % 3], i): verdicts[i % 3] for i in range(25)}


def exported(client: redis.Redis, **query: object) -> list[dict[str, object]]:
    parsed = export.parse_query(**query)  # type: ignore[arg-type]
    body = b"".join(export.stream(client, parsed, ttl_s=TTL_S, page=4)).decode()
    return [json.loads(line) for line in body.splitlines()]


@pytest.mark.redis
def test_every_stored_episode_is_exported_once_newest_first(
    redis_client: redis.Redis, stored: dict[str, Verdict]
) -> None:
    rows = exported(redis_client)
    assert sorted(r["id"] for r in rows) == sorted(stored)  # type: ignore[type-var]
    assert len({r["id"] for r in rows}) == len(rows)
    ends = [r["finished_at"] for r in rows]
    assert ends == sorted(ends, reverse=True)  # type: ignore[type-var]
    assert all(EpisodeExport.model_validate(r).task.tests.files for r in rows)


@pytest.mark.redis
def test_verdicts_time_and_limit_filter(
    redis_client: redis.Redis, stored: dict[str, Verdict]
) -> None:
    cheats = {i for i, v in stored.items() if v is Verdict.cheat}
    assert {r["id"] for r in exported(redis_client, verdicts=["cheat"])} == cheats
    two = {i for i, v in stored.items() if v in (Verdict.cheat, Verdict.passed)}
    assert {r["id"] for r in exported(redis_client, verdicts=["cheat,passed"])} == two
    assert len(exported(redis_client, limit=7)) == 7
    assert exported(redis_client, since="4102444800") == []  # 2100
    assert len(exported(redis_client, until="4102444800")) == len(stored)


@pytest.mark.redis
def test_an_expired_record_is_left_out(
    redis_client: redis.Redis, stored: dict[str, Verdict]
) -> None:
    gone = next(iter(stored))
    redis_client.delete(f"proctor:episode:{gone}")
    assert gone not in {r["id"] for r in exported(redis_client)}


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"verdicts": ["great"]}, "verdict"),
        ({"since": "yesterday-ish"}, "since"),
        ({"format": "csv"}, "format"),
        ({"limit": 0}, "limit"),
        ({"mode": "batch"}, "mode"),
    ],
)
def test_filters_that_do_not_parse_say_which(query: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidFilter, match=says):
        export.parse_query(**query)  # type: ignore[arg-type]


@pytest.mark.redis
def test_a_parquet_export_holds_every_row(
    redis_client: redis.Redis, stored: dict[str, Verdict]
) -> None:

    query = export.parse_query(format="parquet", verdicts=["passed"])
    body = b"".join(export.stream(redis_client, query, ttl_s=TTL_S, page=4))
    table = pq.read_table(io.BytesIO(body))
    passed = {i for i, v in stored.items() if v is Verdict.passed}
    assert set(table.column("id").to_pylist()) == passed
