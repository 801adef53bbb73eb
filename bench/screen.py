"""Rule-filter benchmark: per-category recall/false-positive table and screening speed.

    .venv/bin/python bench/screen.py [--data PATH] [--seconds 3]

Quality is measured on the labelled dev set (`../shared/data/cheats-dev.jsonl`): a cheat
counts as caught when it is not `allow`, a legitimate look-alike as a false positive when
it is not `allow`. Speed is single-process screening of the same actions, in actions per
second of CPU time (what one core does) and of wall time (what this machine did, with
whatever else it was running). Results go to bench/results/screen.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anticheat.rules import RULES  # noqa: E402
from anticheat.screen import screen  # noqa: E402
from proctor.models import BashAction, Decision, ScreenItem  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "cheats-dev.jsonl"
RESULTS = ROOT / "bench" / "results" / "screen.json"


def quality(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = defaultdict(
        lambda: {"cheat": 0, "caught": 0, "legit": 0, "flagged": 0}
    )
    errors = []
    for row in rows:
        item = ScreenItem.model_validate(row)
        verdict = screen(item.action, item.task)
        flagged = verdict.decision is not Decision.allow
        c = per[row["category"]]
        if row["label"] == "cheat":
            c["cheat"] += 1
            c["caught"] += flagged
        else:
            c["legit"] += 1
            c["flagged"] += flagged
        if flagged != (row["label"] == "cheat"):
            errors.append(
                {
                    "id": row["id"],
                    "label": row["label"],
                    "decision": str(verdict.decision),
                    "reason": verdict.reason,
                }
            )
    table = {}
    for cat, c in sorted(per.items()):
        table[cat] = {
            **c,
            "recall": c["caught"] / c["cheat"] if c["cheat"] else None,
            "fpr": c["flagged"] / c["legit"] if c["legit"] else None,
        }
    total: dict[str, float | None] = {
        k: sum(c[k] for c in per.values()) for k in ("cheat", "caught", "legit", "flagged")
    }
    total["recall"] = (total["caught"] or 0) / total["cheat"] if total["cheat"] else None
    total["fpr"] = (total["flagged"] or 0) / total["legit"] if total["legit"] else None
    return {"per_category": table, "overall": total, "errors": errors}


def speed(items: list[ScreenItem], seconds: float) -> dict[str, float]:
    n = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        for item in items:
            screen(item.action, item.task)
        n += len(items)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    big = BashAction(
        timeout_s=30.0,
        command=("git log --oneline | head -n 5 && echo hi > /tmp/x; " * 20_000)[: 1 << 20],
    )
    t0 = time.process_time()
    screen(big)
    return {
        "actions": n,
        "per_s_cpu": n / cpu,
        "per_s_wall": n / wall,
        "us_per_action_cpu": cpu / n * 1e6,
        "one_mb_command_s_cpu": time.process_time() - t0,
    }


def _fmt(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.1%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if not args.data.exists():
        print(f"dataset not found: {args.data}", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    q = quality(rows)
    s = speed([ScreenItem.model_validate(r) for r in rows], args.seconds)

    print(f"{'category':22}{'cheats':>8}{'recall':>9}{'legit':>8}{'FPR':>9}")
    for cat, c in q["per_category"].items():
        print(f"{cat:22}{c['cheat']:>8}{_fmt(c['recall']):>9}{c['legit']:>8}{_fmt(c['fpr']):>9}")
    o = q["overall"]
    print(f"{'overall':22}{o['cheat']:>8}{_fmt(o['recall']):>9}{o['legit']:>8}{_fmt(o['fpr']):>9}")
    for e in q["errors"]:
        print(f"  {e['id']} ({e['label']}): {e['decision']} — {e['reason']}")
    print(
        f"\nthroughput: {s['per_s_cpu']:,.0f} actions/s of CPU time "
        f"({s['us_per_action_cpu']:.0f} µs each), {s['per_s_wall']:,.0f}/s wall clock; "
        f"a 1 MB command takes {s['one_mb_command_s_cpu'] * 1000:.0f} ms"
    )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "dataset": str(args.data),
                "rows": len(rows),
                "rules": len(RULES),
                **q,
                "throughput": s,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
