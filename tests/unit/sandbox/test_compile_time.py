"""A compile's limit counts its own time: the runner stops a run with `cpu_limit_s` once it
has both run and spent CPU for that long, and at `timeout_s` whatever it spent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from workers.sandbox.protocol import Program, Run, RunResult
from workers.sandbox.sandbox import BOOT, boot_input, runner_source

BUSY = "python3 -c 'while True: pass'"


def run(tmp_path: Path, command: str, *, cpu_limit_s: float, timeout_s: float) -> RunResult:
    op = Run(command=command, cwd=str(tmp_path), cpu_limit_s=cpu_limit_s, timeout_s=timeout_s)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=boot_input(runner_source()) + Program([op]).request("n"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)["results"]["0"]
    return RunResult(**{k: v for k, v in result.items() if k != "kind"})


def test_waiting_is_not_the_compilers_time(tmp_path: Path) -> None:
    # past its limit by the wall clock, but it spent no CPU: it finishes
    done = run(tmp_path, "sleep 1.2; echo built", cpu_limit_s=0.3, timeout_s=20)
    assert (done.timed_out, done.exit_code, done.stdout) == (False, 0, "built\n")
    assert done.duration_s >= 1.2
    assert done.cpu_s is not None and done.cpu_s < 0.3


def test_a_compile_that_computes_past_its_limit_is_stopped(tmp_path: Path) -> None:
    done = run(tmp_path, BUSY, cpu_limit_s=0.3, timeout_s=20)
    assert done.timed_out
    assert done.cpu_s is not None and done.cpu_s >= 0.3
    assert done.duration_s < 20


def test_the_cpu_of_a_compiles_children_counts(tmp_path: Path) -> None:
    # the compiler's own processes (a driver's children, a pipeline) are its time
    done = run(tmp_path, f"{BUSY} & {BUSY}; wait", cpu_limit_s=0.3, timeout_s=20)
    assert done.timed_out and done.duration_s < 20


def test_a_compile_that_waits_on_nothing_is_stopped_by_the_wall_clock(tmp_path: Path) -> None:
    done = run(tmp_path, "sleep 30", cpu_limit_s=0.3, timeout_s=1.5)
    assert done.timed_out and done.duration_s < 10
