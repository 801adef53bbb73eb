"""Overload: open-loop arrivals at a multiple of what the host sustains, against the wait bound.

    python bench/overload.py [--isolation pooled] [--factor 2] [--seconds 45]
                             [--max-wait default|S] [--limit 164]

One service (the deployment's defaults but for `--isolation` and `--max-wait`, which is
`PROCTOR_MAX_QUEUE_WAIT_S`; `default`: core/defaults.py's):
  1. closed loop, C=16: HumanEval's canonical programs (`assert` format) through
     `POST /v1/episodes?wait=300`, a 429 sent again after its `Retry-After` as the SDK
     does, twice over (the first pass warms the pools and the drain rate the bound
     estimates waits from): the C=16 p95, and the rate it sustains;
  2. open loop: `--factor` times that rate for `--seconds`, a request at evenly spaced
     moments whatever the answers (a 429 is not sent again: a new arrival is a new
     request), each its own run (a unique `metadata`, so nothing is shared by dedup).
Reports the accepted requests' p95 (from the moment each was due, so a client that fell
behind is counted against the service, not hidden), its ratio to the C=16 p95, the share
refused, that every refusal carried `Retry-After`, and that nothing was lost: every
accepted episode ended `completed` with a reward (1 for these programs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import aiohttp
from harness import machine, percentile, service, summary, wait_for_warm_pools, write
from oneshot import episode

from core.defaults import ISOLATION, MAX_QUEUE_WAIT_S
from tests import humaneval

CONNECTIONS = 2048  # more than can be in flight: the client never holds an arrival back


async def open_loop(
    url: str, episodes: list[dict[str, Any]], rate: float, seconds: float
) -> dict[str, Any]:
    """Send an episode every 1/rate s for `seconds`, each answered on its own."""
    accepted: list[float] = []
    refused: list[float] = []
    rewards: list[float | None] = []
    without_retry_after = 0
    lost: list[str] = []  # accepted, not ended `completed` with a reward: what was lost
    late = 0.0  # the most the client sent behind schedule
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def one(body: dict[str, Any], due: float) -> None:
            nonlocal without_retry_after, late
            late = max(late, time.monotonic() - due)
            async with session.post("/v1/episodes", params={"wait": "300"}, json=body) as answer:
                status, retry, result = answer.status, answer.headers.get("Retry-After"), None
                result = await answer.json()
            elapsed = time.monotonic() - due
            if status == 429:
                refused.append(elapsed)
                without_retry_after += not retry
                return
            if status not in (200, 202):
                lost.append(f"{status}: {result}")
                return
            while result.get("status") not in ("completed", "failed", "cancelled"):
                path = f"/v1/episodes/{result['id']}"  # not ended within the wait: ask again
                async with session.get(path, params={"wait": "300"}) as again:
                    result = await again.json()
                elapsed = time.monotonic() - due
            if result.get("status") != "completed" or result.get("reward") is None:
                lost.append(f"{result.get('id')}: {result.get('status')} {result.get('verdict')}")
                return
            accepted.append(elapsed)
            rewards.append(result.get("reward"))

        started = time.monotonic()
        count = int(rate * seconds)
        tasks = []
        for i in range(count):
            due = started + i / rate
            await asyncio.sleep(max(due - time.monotonic(), 0))
            body = episodes[i % len(episodes)]
            body = {**body, "metadata": {**body["metadata"], "round": f"open-{i}"}}
            tasks.append(asyncio.create_task(one(body, due)))
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - started
    return {
        "sent": count,
        "rate_per_s": round(rate, 2),
        "accepted": len(accepted),
        "accepted_per_s": round(len(accepted) / seconds, 2),
        "refused_429": len(refused),
        "refused_share": round(len(refused) / count, 3) if count else 0.0,
        "refused_without_retry_after": without_retry_after,
        "lost": len(lost),
        "lost_examples": lost[:5],
        "reward_1": sum(r == 1.0 for r in rewards),
        "refusal_p95_s": round(percentile(refused, 95), 4) if refused else None,
        "client_late_max_s": round(late, 3),
        "elapsed_s": round(elapsed, 2),
        **summary(accepted),
    }


async def closed_loop(url: str, episodes: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """`concurrency` clients, each sending its next episode when the last is answered, as a
    trainer with the SDK does: a 429 is sent again after its `Retry-After` (latency counts
    from the first send; the 429s are counted)."""
    latencies: list[float] = []
    ok = refusals = 0
    slots = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def one(body: dict[str, Any]) -> None:
            nonlocal ok, refusals
            async with slots:
                started = time.monotonic()
                while True:
                    async with session.post(
                        "/v1/episodes", params={"wait": "300"}, json=body
                    ) as answer:
                        status, retry = answer.status, answer.headers.get("Retry-After", "1")
                        result = await answer.json()
                    if status != 429:
                        break
                    refusals += 1
                    await asyncio.sleep(float(retry))
                latencies.append(time.monotonic() - started)
            ok += result.get("reward") == 1.0

        started = time.monotonic()
        await asyncio.gather(*(one(e) for e in episodes))
        elapsed = time.monotonic() - started
    return {
        "episodes": len(episodes),
        "ok": ok,
        "refused_429_then_resent": refusals,
        "elapsed_s": round(elapsed, 2),
        "per_s": round(len(episodes) / elapsed, 2),
        **summary(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--isolation", default=ISOLATION)
    parser.add_argument("--factor", type=float, default=2.0, help="times the C=16 rate")
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument(
        "--max-wait", default="default", help="PROCTOR_MAX_QUEUE_WAIT_S (default: the default)"
    )
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument("--workers", default="auto", help="PROCTOR_WORKER_CONCURRENCY")
    args = parser.parse_args()
    if not humaneval.DATA.exists():
        sys.exit(f"HumanEval data not found at {humaneval.DATA}")
    problems = humaneval.load()[: args.limit]
    bound = MAX_QUEUE_WAIT_S if args.max_wait == "default" else float(args.max_wait)
    settings = {
        "isolation": args.isolation,
        "worker_concurrency": args.workers,
        "max_queue_wait_s": repr(bound),
    }
    out: dict[str, Any] = {"machine": machine(), "isolation": args.isolation, "max_wait_s": bound}
    with service(**settings) as url:
        base = [episode(p, "assert") for p in problems]
        for name in ("warm", "c16"):
            print(f"proctor {args.isolation}: closed loop C=16 ({name}) ...", flush=True)
            fresh = [
                {**e, "metadata": {**e["metadata"], "round": f"{name}-{i}"}}
                for i, e in enumerate(base * 2)
            ]
            out[name] = asyncio.run(closed_loop(url, fresh, 16))
            wait_for_warm_pools(url)
        c16 = out["c16"]
        rate = args.factor * c16["per_s"]
        print(
            f"open loop: {rate:.1f}/s ({args.factor}x C=16's {c16['per_s']}/s) for "
            f"{args.seconds:g} s, wait bound {bound:g} s ...",
            flush=True,
        )
        flood = asyncio.run(open_loop(url, base, rate, args.seconds))
        flood["p95_x_c16"] = round(flood["p95_s"] / c16["p95_s"], 2) if c16["p95_s"] else None
        out["open_loop"] = flood
    for key in ("c16", "open_loop"):
        print(f"{key}: {json.dumps(out[key])}")
    print(
        f"\nC=16 p95 {c16['p95_s']} s, accepted p95 under {args.factor}x {flood['p95_s']} s: "
        f"{flood['p95_x_c16']}x; refused {flood['refused_share']:.1%} (all with Retry-After:"
        f" {flood['refused_without_retry_after'] == 0}); lost {flood['lost']}"
    )
    path = write(f"overload-{args.isolation}", out)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
