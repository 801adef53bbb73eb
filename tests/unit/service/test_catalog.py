"""The catalog against a real Redis: what `finish` indexes is what the filters find."""

from __future__ import annotations

import time

import pytest
import redis

from core import endings
from core.store import EpisodeStore
from proctor.models import (
    CheatCategory,
    CheatReport,
    EpisodeCreate,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Timings,
    Verdict,
)
from service.catalog import Catalog, EpisodeFilter, InvalidFilter
from tests.conftest import emptied

REQUEST = {"task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}, "solution": {}}


def ended(
    store: EpisodeStore, verdict: Verdict, *, trainer: str = "t1", total_s: float = 0.3
) -> str:
    request = EpisodeCreate.model_validate(
        {**REQUEST, "metadata": {"trainer": trainer, "k": "a=b"}}
    )
    admission = store.create([request], dedup_keys=[None], max_queued=10_000, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    cheat = CheatReport()
    if verdict is Verdict.cheat:
        evidence = Evidence(
            source=EvidenceSource.rule,
            category=CheatCategory.vcs_history,
            detail="git log --all",
            rule="vcs.future-commits",
        )
        cheat = CheatReport(detected=True, evidence=[evidence])
    result = endings.ended(
        record,
        EpisodeStatus.completed,
        verdict,
        reward=1.0 if verdict is Verdict.passed else 0.0,
        passed=verdict is Verdict.passed,
        timings=Timings(total_s=total_s),
        cheat=cheat,
    )
    assert store.finish(result)
    return record.id


@pytest.fixture
def store(redis_client: redis.Redis) -> EpisodeStore:
    emptied(redis_client)
    return EpisodeStore(redis_client)


@pytest.mark.redis
def test_filters_find_what_finish_indexed(store: EpisodeStore) -> None:
    passed = [ended(store, Verdict.passed) for _ in range(5)]
    cheats = [ended(store, Verdict.cheat, trainer="t2") for _ in range(3)]
    catalog = Catalog(store.redis, ttl_s=store.result_ttl_s)

    everything = catalog.list(EpisodeFilter())
    assert [r.id for r in everything.rows] == (passed + cheats)[::-1]  # newest first
    assert everything.next_cursor is None
    assert catalog.count(EpisodeFilter()).n == 8

    flt = EpisodeFilter.parse(verdict="cheat", trainer="t2")
    assert [r.id for r in catalog.list(flt).rows] == cheats[::-1]
    assert catalog.count(flt).n == 3 and catalog.count(flt).exact
    assert catalog.count(EpisodeFilter.parse(verdict="cheat", trainer="t1")).n == 0
    assert catalog.count(EpisodeFilter.parse(meta=["k=a=b"], mode="oneshot")).n == 8
    row = catalog.list(flt).rows[0]
    assert row.rules == ("vcs.future-commits",) and row.categories == ("vcs_history",)
    assert catalog.rule_hits() == {"vcs.future-commits": 3}
    assert catalog.categories() == {"vcs_history": 3}
    assert catalog.verdict_counts(60) == {"passed": 5, "cheat": 3}

    # pages of 3, each carrying on where the last one stopped
    seen: list[str] = []
    cursor = None
    while True:
        page = catalog.list(EpisodeFilter(), limit=3, cursor=cursor)
        seen += [r.id for r in page.rows]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == (passed + cheats)[::-1]
    assert list(catalog.ids(EpisodeFilter.parse(verdict="passed"), chunk=2)) == passed[::-1]

    assert catalog.count(EpisodeFilter.parse(until=str(time.time() - 3600))).n == 0
    assert catalog.count(EpisodeFilter.parse(since="1h")).n == 8
    minute = catalog.minutes(last=2)[-1]
    assert minute.ended == 8 and minute.verdicts == {"passed": 5, "cheat": 3}
    assert minute.categories == {"vcs_history": 3}
    assert minute.p95_s == 0.5 and minute.mean_s == pytest.approx(0.3)


@pytest.mark.redis
def test_equal_end_times_page_without_loss(store: EpisodeStore) -> None:
    """Ids that ended in the same instant are ordered by id, so a cursor skips none."""
    ids = [f"ep_{i:03}" for i in range(7)]
    for episode_id in ids:
        store.redis.zadd("proctor:catalog:ended", {episode_id: 1e12})
    catalog = Catalog(store.redis, ttl_s=10**13)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        _, done, last, pairs = catalog._walk(
            ["proctor:catalog:ended"],
            0,
            float("inf"),
            None if cursor is None else cursor,
            limit=2,
            budget=100,
        )
        seen += [i for i, _ in pairs]
        if done:
            break
        cursor = last
    assert seen == sorted(ids, reverse=True)


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"verdict": "great"}, "verdict: 'great' is not one of"),
        ({"mode": "batch"}, "mode: 'batch' is not one of"),
        ({"meta": ["novalue"]}, "meta: 'novalue' is not key=value"),
        ({"since": "yesterday"}, "since: 'yesterday' is not a time"),
        ({"since": "2h", "until": "3h"}, "since: it is after until"),
    ],
)
def test_filters_that_do_not_parse_say_why(params: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidFilter, match=reason) as error:
        EpisodeFilter.parse(**params)  # type: ignore[arg-type]
    assert error.value.status_code == 422


def test_times_parse_as_ages_iso_and_unix_seconds() -> None:
    flt = EpisodeFilter.parse(since="15m", until="2026-01-01T00:00:00+00:00", now=10_000.0)
    assert flt.since == 10_000.0 - 900 and flt.until == 1767225600.0
    assert EpisodeFilter.parse(since="12.5").since == 12.5
