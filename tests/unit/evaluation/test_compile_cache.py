"""The compile cache: keyed by everything a compile's outcome depends on, filled only from
the compile step's own output, bounded (least recently used out first), and a hit is a
copy written into the episode's workspace."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

import pytest

from proctor.models import Limits, Solution, TaskSpec, TestFormat, TestSpec
from workers.evaluation.compile_cache import (
    MAX_INPUT_BYTES,
    CompileCache,
    Entry,
    cache_key,
    host_cache,
    store,
    with_cache,
)
from workers.evaluation.grading import grading_plan
from workers.sandbox.protocol import (
    KillAll,
    Op,
    Program,
    Reply,
    Result,
    Results,
    Run,
    RunResult,
    Snapshot,
    SnapshotResult,
    Write,
)

DIGEST = "sha256:" + "a" * 64
SOURCE = "int main(){return 0;}\n"


def task(language: str = "cpp", stdin: str = "1\n", **changes: object) -> TaskSpec:
    spec = TaskSpec(
        image="cpp",
        language=language,
        tests=TestSpec(files={".stdin": stdin}, command="./main", format=TestFormat.exit_code),
        limits=Limits(compile_timeout_s=5),
    )
    return spec.model_copy(update=changes)


def solution(code: str = SOURCE, name: str = "main.cpp") -> Solution:
    return Solution(files={name: code})


def key(spec: TaskSpec, sol: Solution, digest: str = DIGEST) -> str | None:
    plan = grading_plan(spec, keep=set(), restore={})
    assert plan.compile is not None
    return cache_key(spec, sol, plan.compile, digest)


def test_the_key_is_the_code_the_flags_and_the_image() -> None:
    first = key(task(), solution())
    assert first is not None and first == key(task(), solution())
    # a case's stdin is not something the compile saw
    assert key(task(stdin="2\n"), solution()) == first
    assert key(task(), solution(SOURCE + "// another\n")) != first
    assert key(task(), solution(), "sha256:" + "b" * 64) != first
    assert key(task("c"), solution(name="main.c")) != key(task("c"), solution("x", "main.c"))
    assert key(task(files={"lib.h": "#define X 1\n"}), solution()) != first
    assert key(task(limits=Limits(compile_timeout_s=5, memory_mb=256)), solution()) != first
    # what a later compile's limit is, is checked at the hit, not keyed
    assert key(task(limits=Limits(compile_timeout_s=1)), solution()) == first


def test_a_compile_that_builds_the_tests_keys_them() -> None:
    spec = task("go_test", stdin="a")
    sol = solution("package main\n", "main_test.go")
    assert key(spec, sol) != key(task("go_test", stdin="b"), sol)


def test_what_anything_but_the_files_shaped_is_not_cached() -> None:
    assert key(task(setup=["echo hi > lib.h"]), solution()) is None
    acting = Solution.model_validate(
        {"files": {"main.cpp": SOURCE}, "actions": [{"type": "bash", "command": "true"}]}
    )
    assert key(task(), acting) is None
    assert key(task(), solution(), "") is None
    # a workspace too large to read back whole compiles every time
    assert key(task(files={"big.txt": "x" * (MAX_INPUT_BYTES + 1)}), solution()) is None
    assert key(task("verilog"), solution("module tb; endmodule\n", "main.sv")) is None


def test_entries_come_back_as_stored_and_a_damaged_one_is_a_miss(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 1 << 20)
    entry = Entry({"main": b"\x7fELF program"}, ("main",), 0.4)
    cache.put("k1", entry)
    assert cache.get("k1") == entry
    assert cache.get("k2") is None
    (tmp_path / "k1" / "files" / "main").write_bytes(b"\x7fELF other")
    assert cache.get("k1") is None


def test_the_least_recently_used_go_first_past_the_budget(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 2500)
    for name in ("old", "used", "new"):
        cache.put(name, Entry({"main": b"x" * 1000}, ("main",), 0.1))
        past = time.time() - {"old": 300, "used": 200, "new": 0}[name]
        os.utime(tmp_path / name, (past, past))
    assert cache.get("used") is not None  # a hit makes it recent
    cache.put("newest", Entry({"main": b"x" * 1000}, ("main",), 0.1))
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["new", "newest"] or kept == ["newest", "used"]
    assert "old" not in kept and "newest" in kept


def test_what_a_dead_worker_left_half_written_is_swept(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 1 << 20)
    stale, fresh = tmp_path / ".staging-dead", tmp_path / ".staging-busy"
    stale.mkdir()
    fresh.mkdir()
    past = time.time() - 2 * 3600
    os.utime(stale, (past, past))
    cache.put("k", Entry({"main": b"x"}, ("main",), 0.1))
    assert not stale.exists() and fresh.exists()


def test_a_directory_others_can_write_turns_the_cache_off(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    assert host_cache(shared, 64) is None
    assert host_cache(tmp_path / "own", 64) is not None
    assert host_cache(tmp_path / "off", 0) is None


def reply_for(program: Program, results: dict[Op[Any], Result]) -> Results:
    return Results(
        program, Reply(nonce="n", results={program.id_of(op): r for op, r in results.items()})
    )


def test_a_miss_reads_the_program_back_before_it_runs_and_stores_it(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 1 << 20)
    spec, sol = task(), solution()
    plan = grading_plan(spec, keep=set(), restore={})
    cached, pending = with_cache(cache, plan, spec, sol, DIGEST)
    assert pending is not None and cached.compile is plan.compile
    at = cached.ops.index(plan.compile)
    kill, snap = cached.ops[at + 1], cached.ops[at + 2]
    assert isinstance(kill, KillAll) and isinstance(snap, Snapshot)
    assert cached.ops.index(cached.test) > at + 2  # every process killed, then read, then run
    program = Program(cached.ops)
    compiled = RunResult(
        exit_code=0, timed_out=False, duration_s=3.0, stdout="", stderr="", cpu_s=0.5
    )
    binary = b"\x7fELF\x00\xff program"
    snapshot = SnapshotResult(
        files={"main.cpp": SOURCE}, binary={"main": base64.b64encode(binary).decode()}
    )
    reply = reply_for(program, {plan.compile: compiled, snap: snapshot})
    store(cache, pending, reply)
    assert cache.get(pending.key) == Entry({"main": binary}, ("main",), 0.5)

    # the next episode of the same code gets a copy, and runs no compiler
    hit, nothing = with_cache(cache, grading_plan(spec, keep=set(), restore={}), spec, sol, DIGEST)
    assert nothing is None and hit.compile is not None and hit.compile.command == ":"
    at = hit.ops.index(hit.compile)
    written = hit.ops[at - 1]
    assert isinstance(written, Write)
    assert written.binary == {"main": base64.b64encode(binary).decode()}
    assert written.executable == ["main"]
    assert not any(isinstance(op, Snapshot) for op in hit.ops)


def test_a_failed_compile_or_a_missing_program_is_not_stored(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 1 << 20)
    spec, sol = task(), solution()
    plan = grading_plan(spec, keep=set(), restore={})
    cached, pending = with_cache(cache, plan, spec, sol, DIGEST)
    assert pending is not None
    snap = next(op for op in cached.ops if isinstance(op, Snapshot))
    program = Program(cached.ops)
    failed = RunResult(exit_code=1, timed_out=False, duration_s=1.0, stdout="", stderr="error")
    made = SnapshotResult(files={}, binary={"main": base64.b64encode(b"x").decode()})
    store(cache, pending, reply_for(program, {plan.compile: failed, snap: made}))
    ok = RunResult(exit_code=0, timed_out=False, duration_s=1.0, stdout="", stderr="")
    # the source is an input, not a program: with no `main`, nothing is stored
    source_only = SnapshotResult(files={"main.cpp": SOURCE}, binary={})
    store(cache, pending, reply_for(program, {plan.compile: ok, snap: source_only}))
    assert cache.get(pending.key) is None


def test_a_hit_whose_compile_took_longer_than_this_limit_compiles_again(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, 1 << 20)
    spec, sol = task(limits=Limits(compile_timeout_s=1)), solution()
    plan = grading_plan(spec, keep=set(), restore={})
    probe = key(spec, sol)
    assert probe is not None
    cache.put(probe, Entry({"main": b"x"}, ("main",), 2.5))
    cached, pending = with_cache(cache, plan, spec, sol, DIGEST)
    assert pending is not None and cached.compile is plan.compile
    assert isinstance(plan.compile, Run) and plan.compile.command != ":"


@pytest.mark.parametrize("language", ["python", None])
def test_interpreted_languages_are_left_alone(tmp_path: Path, language: str | None) -> None:
    spec = task(language) if language else task().model_copy(update={"language": None})
    plan = grading_plan(spec, keep=set(), restore={})
    cache = CompileCache(tmp_path, 1 << 20)
    assert with_cache(cache, plan, spec, solution(), DIGEST) == (plan, None)
