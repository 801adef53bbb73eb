"""The web page's speed with 100,000 finished episodes stored: p50/p95 per page.

Fills a Redis database of its own (claimed like a test session's, emptied at the end) with
synthetic finished episodes through the store's own `create` and `finish` (so the catalog
index is the one workers write), starts `proctor serve` on it, and times each page.
Also says what the catalog costs in Redis per episode (memory, from MEMORY USAGE).

    .venv/bin/python bench/ui.py [--episodes 100000] [--requests 200]

Target: every page ≤ 200 ms p95. Table on stdout, JSON in bench/results/ui.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import redis
from harness import machine, summary, table, write

from core import keys
from core.store import EpisodeStore
from proctor.models import (
    BashAction,
    CheatCategory,
    CheatReport,
    EpisodeCreate,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Observation,
    SandboxInfo,
    Step,
    Timings,
    Verdict,
)
from tests.conftest import claimed_database, running_api

TARGET_P95_S = 0.200
TRAINERS = ("openrlhf", "verl", "sandboxfusion", "eval")
VERDICTS = [
    (Verdict.passed, 50),
    (Verdict.failed, 30),
    (Verdict.cheat, 6),
    (Verdict.timeout, 4),
    (Verdict.runtime_error, 5),
    (Verdict.compile_error, 3),
    (Verdict.infra_error, 2),
]
RULES = [
    ("vcs.all-refs", CheatCategory.vcs_history),
    ("net.pypi-target", CheatCategory.network_fetch),
]
SPREAD_S = 20 * 3600  # end times spread over the last 20 hours (inside the 24 h TTL)


def request(i: int) -> EpisodeCreate:
    return EpisodeCreate.model_validate(
        {
            "mode": "interactive" if i % 5 == 0 else "oneshot",
            "solution": None if i % 5 == 0 else {"files": {"solution.py": f"x = {i}\n"}},
            "task": {"tests": {"files": {"test_x.py": "def test_x():\n    assert True\n"}}},
            "metadata": {"trainer": TRAINERS[i % 4], "run": f"r{i // 1000}", "sample": str(i)},
        }
    )


def result(episode_id: str, req: EpisodeCreate, rng: random.Random, now: float) -> EpisodeResult:
    verdict = rng.choices([v for v, _ in VERDICTS], [w for _, w in VERDICTS])[0]
    finished = now - rng.random() * SPREAD_S
    total = rng.lognormvariate(0, 0.8)
    steps, evidence = [], []
    if verdict is Verdict.cheat:
        rule, category = rng.choice(RULES)
        steps = [
            Step(
                step=1,
                action=BashAction(command="git log --all --oneline"),
                observation=Observation(output="f737210 base\n", exit_code=0),
                intercepted=True,
                rule=rule,
                category=category,
                reward=-1.0,
            )
        ]
        evidence = [
            Evidence(source=EvidenceSource.rule, category=category, detail=rule, rule=rule, step=1)
        ]
    no_reward = verdict is Verdict.infra_error
    return EpisodeResult(
        id=episode_id,
        status=EpisodeStatus.failed if no_reward else EpisodeStatus.completed,
        mode=req.mode,
        verdict=verdict,
        reward=None if no_reward else (1.0 if verdict is Verdict.passed else 0.0),
        passed=None if no_reward else verdict is Verdict.passed,
        reason=f"synthetic {verdict.value}",
        timings=Timings(total_s=total, queued_s=0.01, run_s=total * 0.8),
        sandbox=SandboxInfo(image="proctor/sandbox-python:latest"),
        steps=steps,
        cheat=CheatReport(detected=bool(evidence), evidence=evidence),
        metadata=req.metadata,
        created_at=datetime.fromtimestamp(finished - total, UTC),
        finished_at=datetime.fromtimestamp(finished, UTC),
    )


def fill(client: redis.Redis, n: int) -> dict[str, Any]:
    store = EpisodeStore(client)
    rng = random.Random(15)
    now = time.time()
    finish_s: list[float] = []
    ids: list[str] = []
    for start in range(0, n, 1000):
        batch = [request(i) for i in range(start, min(start + 1000, n))]
        admission = store.create(
            batch, dedup_keys=[None] * len(batch), max_queued=10**9, dedup_ttl_s=60
        )
        for episode_id, req in zip(admission.ids, batch, strict=True):
            r = result(episode_id, req, rng, now)
            t0 = time.perf_counter()
            assert store.finish(r)
            finish_s.append(time.perf_counter() - t0)
            ids.append(episode_id)
        sys.stderr.write(f"\rfilled {len(ids)}/{n}")
    sys.stderr.write("\n")
    return {"ids": ids, "finish": summary(finish_s)}


def catalog_bytes(client: redis.Redis, ids: list[str], n: int) -> dict[str, float]:
    """Redis memory the catalog holds per episode: its sets and minutes, and the summary."""
    total = 0
    for key in client.scan_iter(match=f"{keys.PREFIX}catalog:*", count=1000):
        total += int(client.memory_usage(key, samples=0) or 0)
    sample = ids[:: max(len(ids) // 1000, 1)]
    summary_bytes = sum(len(client.hget(keys.episode(i), "summary") or b"") for i in sample)
    return {
        "index_bytes_per_episode": round(total / n, 1),
        "summary_bytes_per_episode": round(summary_bytes / len(sample), 1),
    }


def time_pages(url: str, pages: dict[str, str], requests: int) -> list[dict[str, Any]]:
    rows = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for name, path in pages.items():
            for _ in range(5):  # warm up
                assert http.get(path).status_code == 200, (path, http.get(path).text[:300])
            latencies = []
            for _ in range(requests):
                t0 = time.perf_counter()
                response = http.get(path)
                latencies.append(time.perf_counter() - t0)
                assert response.status_code == 200, path
            s = summary(latencies)
            rows.append(
                {
                    "page": name,
                    "path": path,
                    "p50_ms": round(s["p50_s"] * 1000, 1),
                    "p95_ms": round(s["p95_s"] * 1000, 1),
                    "max_ms": round(max(latencies) * 1000, 1),
                    "ok": s["p95_s"] <= TARGET_P95_S,
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with claimed_database() as redis_url:
        client = redis.Redis.from_url(redis_url)
        try:
            t0 = time.perf_counter()
            filled = fill(client, args.episodes)
            fill_s = time.perf_counter() - t0
            cost = catalog_bytes(client, filled["ids"], args.episodes)
            some = filled["ids"][len(filled["ids"]) // 2]
            pages = {
                "overview": "/ui",
                "episodes": "/ui/episodes",
                "episodes verdict=cheat": "/ui/episodes?verdict=cheat",
                "episodes trainer+verdict": "/ui/episodes?trainer=verl&verdict=failed",
                "episodes rare meta+mode": "/ui/episodes?meta=run%3Dr7&mode=interactive",
                "episodes since=1h": "/ui/episodes?since=1h",
                "episodes page 20 (cursor)": "",
                "episode": f"/ui/episodes/{some}",
                "rules": "/ui/rules",
            }
            with running_api(redis_url) as url:
                pages["episodes page 20 (cursor)"] = deep_link(url, 20)
                rows = time_pages(url, pages, args.requests)
        finally:
            client.flushdb()
            client.close()
    print(table(rows, ["page", "p50_ms", "p95_ms", "max_ms", "ok"]))
    print(
        f"\n{args.episodes} episodes filled in {fill_s:.0f} s; finish() with the index: "
        f"p50 {filled['finish']['p50_s'] * 1000:.2f} ms, "
        f"p95 {filled['finish']['p95_s'] * 1000:.2f} ms"
    )
    print(
        f"catalog in Redis: {cost['index_bytes_per_episode']:.0f} B/episode in its sets and "
        f"minutes + a {cost['summary_bytes_per_episode']:.0f} B summary in the record"
    )
    path = write(
        "ui",
        {
            "machine": machine(),
            "episodes": args.episodes,
            "requests_per_page": args.requests,
            "target_p95_ms": TARGET_P95_S * 1000,
            "pages": rows,
            "finish_with_index": filled["finish"],
            "catalog_cost": cost,
        },
    )
    print(f"\n{path}")
    return 0 if all(r["ok"] for r in rows) else 1


def deep_link(url: str, pages: int) -> str:
    """The episodes page `pages` pages deep, following the Older links (a cursor)."""
    path = "/ui/episodes"
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(pages):
            html = http.get(path).text
            start = html.index('href="/ui/episodes?', html.index('id="older"') - 200)
            path = html[start + 6 : html.index('"', start + 6)].replace("&amp;", "&")
    return path


if __name__ == "__main__":
    sys.exit(main())
