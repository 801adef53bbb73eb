"""A Code-Contests-shaped case set: one program x 50 stdin cases, judged in one request.

Used by `bench/languages.py --cases` (it needs its service): the same C++ and Python
solution (maximum subarray sum of n numbers) runs
  - host:     compiled once (C++) then run 50 times as plain subprocesses, each output
              compared with the reference: what a trainer's own loop over cases costs with
              no isolation at all
  - Proctor:  one `POST /run_code` with `cases` (Proctor's extension): one sandbox, one
              compile, 50 runs with per-case verdicts
Both check every output; a wrong answer does not count as fast.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

CASES = 50
CPP = """#include <bits/stdc++.h>
using namespace std;
int main(){ios::sync_with_stdio(false);cin.tie(nullptr);int n;cin>>n;long long best=LLONG_MIN,run=0;
for(int i=0;i<n;i++){long long x;cin>>x;run=max(x,run+x);best=max(best,run);}cout<<best<<"\\n";}
"""
PYTHON = """import sys
data = sys.stdin.buffer.read().split()
n = int(data[0])
best, run = None, 0
for x in map(int, data[1 : n + 1]):
    run = x if best is None or run + x < x else run + x
    best = run if best is None or run > best else best
print(best)
"""
SOURCES = {"cpp": ("main.cpp", CPP), "python": ("main.py", PYTHON)}
# the system's interpreter, not a version manager's shim (a shell script per start)
PYTHON_BIN = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


def case_set(count: int = CASES) -> list[dict[str, str]]:
    """`count` cases of growing size (10 to ~10,000 numbers), answers from a reference."""
    cases, seed = [], 12345
    for k in range(count):
        n = 10 + k * 200
        values = []
        for _ in range(n):
            seed = (seed * 1103515245 + 12345) % (1 << 31)
            values.append(seed % 2001 - 1000)
        best, run = values[0], 0
        for i, x in enumerate(values):
            run = x if i == 0 else max(x, run + x)
            best = max(best, run)
        stdin = f"{n}\n{' '.join(map(str, values))}\n"
        cases.append({"stdin": stdin, "expected_stdout": f"{best}\n"})
    return cases


def host(language: str, cases: list[dict[str, str]], tag: str) -> dict[str, Any]:
    """Compile once on the host (C++), run the program once per case; wall time of all."""
    name, code = SOURCES[language]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / name).write_text(f"{'//' if language == 'cpp' else '#'} {tag}\n{code}")
        started = time.perf_counter()
        if language == "cpp":
            subprocess.run(
                ["g++", "-std=c++17", "-O2", "-pipe", "-DONLINE_JUDGE", name, "-o", "main"],
                cwd=work,
                check=True,
            )
        compiled = time.perf_counter()
        command = ["./main"] if language == "cpp" else [PYTHON_BIN, name]
        accepted = 0
        for case in cases:
            ran = subprocess.run(
                command, cwd=work, input=case["stdin"].encode(), capture_output=True, check=False
            )
            accepted += ran.stdout.decode().split() == case["expected_stdout"].split()
        ended = time.perf_counter()
    return {
        "accepted": accepted,
        "compile_s": round(compiled - started, 4),
        "cases_s": round(ended - compiled, 4),
        "total_s": round(ended - started, 4),
    }


def proctor(
    client: httpx.Client, language: str, cases: list[dict[str, str]], tag: str
) -> dict[str, Any]:
    """One `/run_code` request with every case; its wall time and what it reports."""
    code = SOURCES[language][1]
    body = {
        "code": f"{'//' if language == 'cpp' else '#'} {tag}\n{code}",
        "language": language,
        "cases": cases,
        "compile_timeout": 60,
        "run_timeout": 10,
        "memory_limit_MB": 512,
    }
    started = time.perf_counter()
    answer = client.post("/run_code", json=body).json()
    total = time.perf_counter() - started
    built = answer.get("compile_result") or {}
    judged = answer.get("cases") or []
    if answer.get("accepted") is None:
        raise RuntimeError(f"/run_code did not judge the cases: {answer.get('message')}")
    return {
        "accepted": answer.get("accepted"),
        "status": answer.get("status"),
        "compile_s": built.get("execution_time"),
        "cases_s": round(sum(c["execution_time"] for c in judged), 4),
        "total_s": round(total, 4),
    }


def measure(client: httpx.Client, run: str, rounds: int = 3) -> list[dict[str, Any]]:
    """Host and Proctor side by side for each language, `rounds` times (the median kept)."""
    cases = case_set()
    rows = []
    for language in SOURCES:
        proctor(client, language, cases[:2], f"warm {run}")
        for runner, fn in (
            ("host", lambda t, lang=language: host(lang, cases, t)),
            ("proctor", lambda t, lang=language: proctor(client, lang, cases, t)),
        ):
            results = sorted(
                (fn(f"{run} {runner} {i}") for i in range(rounds)), key=lambda r: r["total_s"]
            )
            middle = results[len(results) // 2]
            rows.append({"language": language, "runner": runner, "cases": len(cases), **middle})
    return rows
