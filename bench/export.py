"""Export throughput and the durable sink's cost per episode.

    python bench/export.py [--episodes 20000]

Synthetic finished episodes (a task with a test file, a solution, three steps with their
observations, test outcomes; every fifth a cheat with evidence) are stored through the
store's own functions (`create`, `finish`) in a redis-server of this run's own. Then:

- the sink's cost: `finish` timed per episode, in alternating blocks without and with the
  sink (`PROCTOR_SINK_DIR`'s writer, on this machine's disk), and the difference;
- the export: `GET /v1/episodes/export` of all of them from `proctor serve` over HTTP,
  episodes per second counted as the lines arrive (JSON Lines), and with a verdict filter.

Targets: export >= 5,000 episodes/s; the sink adds <= 1 ms per episode.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness
from neighbours import PrivateRedis

from core import endings
from core.sink import EpisodeSink
from core.store import EpisodeStore
from proctor.models import (
    BashAction,
    CheatCategory,
    CheatReport,
    EpisodeCreate,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Observation,
    SandboxInfo,
    Step,
    TestCase,
    TestOutcome,
    Timings,
    Verdict,
)

TARGET_PER_S = 5_000
TARGET_SINK_MS = 1.0
BLOCK = 500
TESTS = "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n" * 4
SOLUTION = "def add(a, b):\n    return a + b\n" * 4


def request(n: int) -> EpisodeCreate:
    return EpisodeCreate.model_validate(
        {
            "task": {"tests": {"files": {"test_solution.py": TESTS}}, "statement": "add two"},
            "solution": {"files": {"solution.py": SOLUTION}},
            "metadata": {"trainer": "bench", "n": str(n)},
        }
    )


def finish_one(store: EpisodeStore, episode_id: str, n: int) -> float:
    """Finish one stored episode with a realistic result; seconds `finish` took."""
    record = store.get(episode_id)
    assert record is not None
    cheat = n % 5 == 0
    steps = [
        Step(
            step=i,
            action=BashAction(command=f"python -c 'print({i})'"),
            observation=Observation(output=f"{i}\n" * 20, exit_code=0, duration_s=0.01),
            intercepted=cheat and i == 3,
            rule="vcs.future-commits" if cheat and i == 3 else None,
            category=CheatCategory.vcs_history if cheat and i == 3 else None,
        )
        for i in (1, 2, 3)
    ]
    evidence = [
        Evidence(
            source=EvidenceSource.rule,
            category=CheatCategory.vcs_history,
            detail="git log --all",
            rule="vcs.future-commits",
            step=3,
        )
    ]
    verdict = Verdict.cheat if cheat else (Verdict.passed if n % 2 else Verdict.failed)
    result = endings.ended(
        record,
        EpisodeStatus.completed,
        verdict,
        reward=1.0 if verdict is Verdict.passed else 0.0,
        passed=verdict is Verdict.passed,
        tests=[TestCase(name="test_add", outcome=TestOutcome.passed, duration_s=0.001)],
        stdout="1 passed in 0.01s\n" * 10,
        steps=steps,
        step_rewards=[0.0, 0.0, -1.0 if cheat else 0.0],
        cheat=CheatReport(detected=cheat, evidence=evidence if cheat else []),
        timings=Timings(total_s=0.5, run_s=0.3, queued_s=0.1),
        sandbox=SandboxInfo(image="python", host="bench"),
    )
    started = time.perf_counter()
    assert store.finish(result, request=record.request)  # as the worker does (workers/jobs.py)
    return time.perf_counter() - started


def store_episodes(
    client: redis.Redis, n: int, sink_dir: Path
) -> tuple[list[float], list[float], float]:
    """Store and finish `n` episodes, alternating blocks without and with the sink."""
    plain_store = EpisodeStore(client)
    sink = EpisodeSink(sink_dir, writer="bench", max_bytes=256 << 20)
    sink_store = EpisodeStore(client, sink=sink)
    without, with_sink = [], []
    for start in range(0, n, BLOCK):
        count = min(BLOCK, n - start)
        admission = plain_store.create(
            [request(start + i) for i in range(count)],
            dedup_keys=[None] * count,
            max_queued=n + BLOCK,
            dedup_ttl_s=60,
        )
        use_sink = (start // BLOCK) % 2 == 1
        store = sink_store if use_sink else plain_store
        times = [finish_one(store, eid, start + i) for i, eid in enumerate(admission.ids)]
        (with_sink if use_sink else without).extend(times)
    sink.close()
    written = sum(p.stat().st_size for p in sink_dir.iterdir())
    return without, with_sink, written / max(len(with_sink), 1)


def api(redis_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = harness.free_port()
    env = {**os.environ, "PROCTOR_REDIS_URL": redis_url, "PROCTOR_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli", "serve"],
        env=env,
        cwd=harness.REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the API was not ready in time")


def export_rate(url: str, params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    lines = size = 0
    first: float | None = None
    with (
        httpx.Client(base_url=url, timeout=600) as client,
        client.stream("GET", "/v1/episodes/export", params=params) as response,
    ):
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if first is None:
                first = time.perf_counter() - started
            lines += chunk.count(b"\n")
            size += len(chunk)
    elapsed = time.perf_counter() - started
    return {
        "query": "&".join(f"{k}={v}" for k, v in params.items()) or "(all)",
        "episodes": lines,
        "seconds": round(elapsed, 3),
        "episodes_per_s": round(lines / elapsed),
        "first_bytes_s": round(first or 0.0, 3),
        "mb": round(size / 1e6, 1),
        "target_per_s": TARGET_PER_S,
        "ok": lines / elapsed >= TARGET_PER_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=20_000)
    args = parser.parse_args()
    private = PrivateRedis()
    sink_dir = Path(tempfile.mkdtemp(prefix="proctor-bench-sink-"))
    process = None
    try:
        client = redis.Redis.from_url(private.url)
        without, with_sink, row_bytes = store_episodes(client, args.episodes, sink_dir)
        base, sunk = statistics.fmean(without) * 1e3, statistics.fmean(with_sink) * 1e3
        sink_row = {
            "episodes": len(with_sink),
            "finish_ms": round(base, 3),
            "finish_with_sink_ms": round(sunk, 3),
            "sink_ms": round(sunk - base, 3),
            "p95_with_sink_ms": round(harness.percentile(with_sink, 95) * 1e3, 3),
            "row_kb": round(row_bytes / 1024, 1),
            "target_ms": TARGET_SINK_MS,
            "ok": sunk - base <= TARGET_SINK_MS,
        }
        process, url = api(private.url)
        exports = [
            export_rate(url, {}),
            export_rate(url, {"verdict": "cheat"}),
            export_rate(url, {"limit": 5000}),
        ]
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        private.close()
        shutil.rmtree(sink_dir, ignore_errors=True)
    print("durable sink, per episode (finish without and with it)")
    print(harness.table([sink_row], list(sink_row)))
    print("\nexport over HTTP (GET /v1/episodes/export, JSON Lines)")
    print(harness.table(exports, list(exports[0])))
    path = harness.write(
        "export", {"machine": harness.machine(), "sink": sink_row, "export": exports}
    )
    print(f"\n{path}")


if __name__ == "__main__":
    main()
