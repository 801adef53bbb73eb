"""The tables of bench/agentic.py: what was measured, summarized beside its baselines,
with the goals of issue 33 as ratios."""

from __future__ import annotations

import argparse
import time
from typing import Any

from agentic_host import cores
from agentic_tasks import TaskImage
from harness import percentile, table

from anticheat.screen import screen
from proctor.models import BashAction

MB = 1 << 20


def stats(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_s": round(percentile(values, 50), 3),
        "p95_s": round(percentile(values, 95), 3),
        "max_s": round(max(values), 3) if values else float("nan"),
    }


def screening_ms(samples: int = 2000) -> float:
    """The rule filter's CPU for one `echo` action, in this process (the worker runs the
    same code before each action): a part of the workers' figure, shown apart."""
    actions = [BashAction(command=f"echo step-{n}") for n in range(samples)]
    screen(actions[0])
    started = time.process_time()
    for action in actions:
        screen(action)
    return (time.process_time() - started) / samples * 1000


def ms_rows(parts: dict[str, float], bare: dict[str, float]) -> list[dict[str, Any]]:
    key = "CPU per echo action"
    rows = [
        {key: p, "proctor_ms": round(v, 2), "bare_exec_ms": round(bare.get(p, 0.0), 2)}
        for p, v in parts.items()
    ]
    rows.append(
        {
            key: "total",
            "proctor_ms": round(sum(parts.values()), 2),
            "bare_exec_ms": round(sum(bare.values()), 2),
        }
    )
    return rows


def report(args: argparse.Namespace, found: dict[str, Any]) -> None:
    ratio = found["ratios"]
    print(f"\n{args.episodes} episodes over {args.images} task images, {cores()} cores")
    print(f"load average: {found['loads']}\n")
    print(table(found["start_rows"], ["start of one episode", "n", "p50_s", "p95_s", "max_s"]))
    print()
    print(
        table(found["ready_rows"], ["ready (all opened at once)", "n", "p50_s", "p95_s", "max_s"])
    )
    print()
    print(table(found["action_rows"], ["round trip", "n", "p50_s", "p95_s", "max_s"]))
    print()
    print(table(found["cpu_rows"], ["CPU per echo action", "proctor_ms", "bare_exec_ms"]))
    print()
    print(table(found["memory_rows"], ["memory per open episode", "MB"]))
    print()
    print(table(found["outcome_rows"], ["outcome", "value"]))
    for what, times in sorted(found["refusals"].items(), key=lambda kv: -kv[1]):
        print(f"refused {times}x: {what}")
    for error in found["errors"][:10]:
        print(f"error: {error}")
    print(
        f"\ngoals: ready p95 {ratio['ready_p95_vs_bare_start_p95']}x the bare start's p95 "
        f"(goal <= 1.5); action p50 {ratio['action_p50_vs_bare_exec_p50']}x a bare exec's "
        "(goal <= 2)"
    )


def summarize(
    args: argparse.Namespace,
    images: list[TaskImage],
    starts: dict[str, list[float]],
    started: dict[str, Any],
    exec_trips: list[float],
    exec_cpu: dict[str, float],
    removed_s: float,
    measured: dict[str, Any],
) -> dict[str, Any]:
    build_s = [i.build_s for i in images]
    start_rows = [{"start of one episode": "build-task + push", **stats(build_s)}]
    start_rows += [{"start of one episode": k, **stats(v)} for k, v in starts.items() if v]
    bare_start = stats(started["running_s"])
    ready = stats(measured["ready_s"])
    ready_rows = [
        {"ready (all opened at once)": "bare docker create+start", **bare_start},
        {"ready (all opened at once)": "proctor interactive episode", **ready},
    ]
    bare_exec = stats(exec_trips)
    action = stats(measured["action_s"])
    action_rows = [
        {"round trip": f"bare docker exec, {args.acting} acting", **bare_exec},
        {"round trip": f"proctor echo action, {args.acting} acting", **action},
        {"round trip": f"proctor action, all {args.episodes} acting", **stats(measured["steps_s"])},
        {"round trip": "proctor finish (hidden tests)", **stats(measured["finish_s"])},
    ]
    screening = screening_ms()
    cpu = dict(measured["cpu_ms_per_action"])
    cpu_rows = ms_rows(cpu, exec_cpu)
    cpu_rows.insert(
        2, {"CPU per echo action": "  of which screening", "proctor_ms": round(screening, 3)}
    )
    before, after = measured["memory_before"], measured["memory_after"]
    count = args.episodes
    memory_rows = [
        {"memory per open episode": part, "MB": round((after[part] - before[part]) / count / MB, 2)}
        for part in ("api + workers (PSS)", "redis (used_memory)", "sandboxes (cgroups)")
    ]
    held = sum(r["MB"] for r in memory_rows)
    memory_rows.append({"memory per open episode": "total of the above", "MB": round(held, 2)})
    memory_rows.append(
        {
            "memory per open episode": "MemAvailable drop (whole host)",
            "MB": round((before["MemAvailable"] - after["MemAvailable"]) / count / MB, 2),
        }
    )
    memory_rows.append(
        {
            "memory per open episode": "bare container (cgroup)",
            "MB": round(started["memory_per_container"] / MB, 2),
        }
    )
    actions_done = len(measured["steps_s"])
    # what serving an action costs: every part but the client and the unclaimed rest
    served = sum(v for k, v in cpu.items() if k != "bench client" and not k.startswith("rest"))
    outcome_rows = [
        {
            "outcome": "honest fixes rewarded 1.0",
            "value": f"{measured['fix_rewarded_1']}/{measured['fixes']}",
        },
        {
            "outcome": "no-ops rewarded 0",
            "value": f"{measured['noop_rewarded_0']}/{measured['noops']}",
        },
        {"outcome": "mismatches", "value": len(measured["mismatches"])},
        {"outcome": "fix or no-op refused (not counted)", "value": measured["fix_or_noop_refused"]},
        {
            "outcome": f"actions/s, {args.acting} acting at 1-3 s",
            "value": round(len(measured["action_s"]) / measured["act_phase_s"], 1),
        },
        {
            "outcome": f"actions/s, all {count} acting (excl. finish)",
            "value": round(actions_done / measured["all_phase_s"], 1),
        },
        {
            "outcome": f"episodes ended/s, all {count} acting",
            "value": round(count / measured["all_phase_s"], 2),
        },
        {
            "outcome": "actions/s the cores allow at this CPU",
            "value": round(cores() * 1000 / max(served, 1e-9), 1),
        },
        {"outcome": "open all (s)", "value": round(measured["open_all_s"], 1)},
        {
            "outcome": "bare: all running (s) / all removed (s)",
            "value": f"{started['all_s']:.1f} / {removed_s:.1f}",
        },
    ]
    ratios = {
        "ready_p95_vs_bare_start_p95": round(ready["p95_s"] / bare_start["p95_s"], 2),
        "action_p50_vs_bare_exec_p50": round(action["p50_s"] / bare_exec["p50_s"], 2),
    }
    return {
        "start_rows": start_rows,
        "ready_rows": ready_rows,
        "action_rows": action_rows,
        "cpu_rows": cpu_rows,
        "memory_rows": memory_rows,
        "outcome_rows": outcome_rows,
        "ratios": ratios,
        "mismatches": measured["mismatches"],
        "cpu_ms_per_episode_end": measured["cpu_ms_per_episode_end"],
    }
