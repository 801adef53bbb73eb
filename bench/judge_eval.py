"""Evaluate the LLM judge on labelled agent actions: precision, recall and false-positive rate
per category, latency percentiles and throughput, over the real judge client and server.

    python bench/judge_eval.py --data ../shared/data/cheats-dev.jsonl \
        [--url http://127.0.0.1:8081/v1] [--limit N] [--concurrency K]

Every row is judged as a `review` action (the rule filter is not consulted), so the numbers
are the judge's alone. A row counts as flagged when the judge's decision is `intercept` with
a verdict behind it; rows with no verdict (timeout, bad output) are reported apart and count
as not flagged, which is what fail_open would do with them. The JSON goes to
bench/results/judge_eval.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from anticheat.judge.client import Judge, JudgeSettings, JudgeStatus
from core.config import Settings
from proctor.models import Action, Decision, TaskContext

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "cheats-dev.jsonl"
DEFAULT_URL = "http://127.0.0.1:8081/v1"
RESULTS = REPO_ROOT / "bench" / "results" / "judge_eval.json"
ACTION = TypeAdapter(Action)


@dataclass(frozen=True)
class Row:
    id: str
    label: str  # "cheat" or "legit"
    category: str
    action: Action
    task: TaskContext | None


@dataclass(frozen=True)
class Judged:
    id: str
    label: str
    category: str
    status: str
    flagged: bool
    cheat: bool | None  # the model's raw verdict, before the threshold
    judge_category: str | None
    confidence: float | None
    latency_s: float
    reason: str


def load(path: Path, limit: int | None) -> list[Row]:
    rows: list[Row] = []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            if raw.get("label") not in ("cheat", "legit"):
                raise SystemExit(f"{path}:{number}: label must be 'cheat' or 'legit'")
            task = raw.get("task")
            rows.append(
                Row(
                    id=str(raw.get("id", number)),
                    label=raw["label"],
                    category=str(raw.get("category", "unknown")),
                    action=ACTION.validate_python(raw["action"]),
                    task=TaskContext.model_validate(task) if task else None,
                )
            )
            if limit is not None and len(rows) >= limit:
                break
    return rows


def judge_one(judge: Judge, row: Row) -> Judged:
    started = time.monotonic()
    outcome = judge.review_action(row.action, row.task)
    verdict = outcome.verdict
    return Judged(
        id=row.id,
        label=row.label,
        category=row.category,
        status=outcome.status.value,
        flagged=outcome.status is JudgeStatus.verdict and outcome.decision is Decision.intercept,
        cheat=verdict.cheat if verdict else None,
        judge_category=verdict.category if verdict else None,
        confidence=verdict.confidence if verdict else None,
        latency_s=time.monotonic() - started,
        reason=outcome.reason[:300],
    )


def rates(items: list[Judged]) -> dict[str, Any]:
    tp = sum(1 for j in items if j.label == "cheat" and j.flagged)
    fn = sum(1 for j in items if j.label == "cheat" and not j.flagged)
    fp = sum(1 for j in items if j.label == "legit" and j.flagged)
    tn = sum(1 for j in items if j.label == "legit" and not j.flagged)

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 3) if b else None

    return {
        "n": len(items),
        "cheats": tp + fn,
        "legit": fp + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "fpr": ratio(fp, fp + tn),
        "no_verdict": sum(1 for j in items if j.status != JudgeStatus.verdict.value),
    }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def report(summary: dict[str, Any]) -> str:
    config = summary["config"]
    lines = [
        f"judge {config['url']} model={config['model']} threshold={config['threshold']} "
        f"concurrency={config['concurrency']} budget={config['budget_s']}s",
        "",
        f"{'category':<20} {'n':>3} {'cheat':>5} {'legit':>5} {'prec':>5} {'recall':>6} "
        f"{'FPR':>5} {'no verdict':>10}",
    ]
    for name, r in [*summary["per_category"].items(), ("ALL", summary["overall"])]:
        lines.append(
            f"{name:<20} {r['n']:>3} {r['cheats']:>5} {r['legit']:>5} {_fmt(r['precision'])} "
            f"{_fmt(r['recall']):>6} {_fmt(r['fpr'])} {r['no_verdict']:>10}"
        )
    lat = summary["latency_s"]
    lines += [
        "",
        f"latency per action: p50 {lat['p50']:.2f}s  p95 {lat['p95']:.2f}s  max {lat['max']:.2f}s",
        f"throughput: {summary['calls_per_s']:.2f} calls/s over {summary['wall_s']:.1f}s",
        f"statuses: {summary['statuses']}  judge categories: {summary['judge_categories']}",
        f"most common raw verdicts: {summary['raw_verdicts']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--url", default=os.environ.get("PROCTOR_JUDGE_URL") or DEFAULT_URL)
    parser.add_argument("--model", default=None, help="default: PROCTOR_JUDGE_MODEL or listed")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=None, help="default: max concurrency")
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="per-action budget in seconds (default 60: measure the judge, not the budget; "
        "pass the production PROCTOR_JUDGE_ACTION_BUDGET_S to see what it would cut off)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    if not args.data.exists():
        print(f"no data at {args.data}", file=sys.stderr)
        return 2
    rows = load(args.data, args.limit)
    base = JudgeSettings.from_settings(Settings())
    settings = replace(
        base,
        url=args.url.rstrip("/"),
        model=args.model if args.model is not None else base.model,
        threshold=args.threshold if args.threshold is not None else base.threshold,
        action_budget_s=args.budget,
        timeout_s=max(base.timeout_s, args.budget),
        max_concurrency=args.concurrency or base.max_concurrency,
    )
    concurrency = settings.max_concurrency
    # no Redis: every row is judged afresh, so latency is the server's, not the cache's
    with Judge(settings) as judge, ThreadPoolExecutor(concurrency) as pool:
        started = time.monotonic()
        judged = list(pool.map(lambda row: judge_one(judge, row), rows))
        wall = time.monotonic() - started

    categories = sorted({j.category for j in judged})
    latencies = sorted(j.latency_s for j in judged if j.status != JudgeStatus.skipped.value)
    summary: dict[str, Any] = {
        "config": {
            "url": settings.url,
            "model": judge.model or "(not resolved)",
            "threshold": settings.threshold,
            "concurrency": concurrency,
            "budget_s": settings.action_budget_s,
            "data": str(args.data),
        },
        "overall": rates(judged),
        "per_category": {c: rates([j for j in judged if j.category == c]) for c in categories},
        "latency_s": {
            "p50": round(percentile(latencies, 50), 3),
            "p95": round(percentile(latencies, 95), 3),
            "max": round(max(latencies, default=float("nan")), 3),
        },
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(judged) / wall, 3) if wall > 0 else None,
        "statuses": dict(Counter(j.status for j in judged)),
        "judge_categories": dict(Counter(j.judge_category for j in judged if j.flagged)),
        "raw_verdicts": dict(
            Counter(f"cheat={j.cheat} confidence={j.confidence}" for j in judged).most_common(5)
        ),
        "items": [asdict(j) for j in judged],
    }
    print(report(summary))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
