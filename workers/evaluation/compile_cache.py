"""A worker host's cache of compiled programs, by content: identical sources with identical
flags in the same image compile once per host.

The key is the SHA-256 of everything a compile's outcome depends on: the image's digest, the
language and its compile command and environment (the grader's random HOME aside), the
limits a compile can fail by (memory, processes, disk), and every file in the workspace
when the compiler runs (the task's files, the solution's, the tests' binary files; the
tests' text files too, but for a language whose compile reads only its source: those are
written after it, `grading.TESTS_AFTER_COMPILE`).

Only a one-shot episode whose solution is files (no actions, no setup commands, no
repository) fills or uses the cache: its workspace at compile time is those files in a
fresh sandbox, so nothing but the request can have shaped the program, and the key names
all of it. An entry is written only by the worker, from the compile step's own output:
right after a compile that succeeded, every process of the sandbox is killed and the
program is read back, before any of it runs. A later episode gets a copy written into its
own workspace; the cache itself is a directory of the worker's (0700), never mounted into
a sandbox. A poisoned entry would need a request whose files hash to the key and compile
to something else: the compilers here are deterministic functions of the files they read.

A hit still honours the request's limit: an entry whose compile took longer (by the same
measure as the limit, `min(cpu, wall)`) than the request allows compiles again, and runs
out of time honestly. Entries are evicted least recently used first (a hit touches its
directory's mtime) once the whole is over its budget.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

from core.config import Settings
from proctor.models import Solution, TaskSpec, TestFormat
from workers.evaluation.grading import TESTS_AFTER_COMPILE, GradingPlan
from workers.sandbox.protocol import KillAll, Results, Run, Snapshot, SnapshotResult, Write

log = logging.getLogger(__name__)

FORMAT = 1  # in the key: a change of what an entry holds misses every older entry
MAX_ARTIFACT_BYTES = 16 << 20  # a program larger than this is not cached
# a miss reads the whole workspace back (`Snapshot`), inputs included: larger inputs than
# this are not cached, so the reply stays well within what a worker reads of it
MAX_INPUT_BYTES = 4 << 20
STALE_STAGING_S = 3600.0  # an entry being written this long ago was left by a dead worker


@dataclass(frozen=True, slots=True)
class Artifacts:
    """What a language's compile leaves in the workspace for its run."""

    patterns: tuple[str, ...]  # workspace paths, or `*.ext` globs of top-level names
    required: tuple[str, ...]  # without these the compile did not make a program
    executable: tuple[str, ...] = ()  # written back with mode 0755


# The languages whose compile output is cached (`core.languages`). A language not here
# compiles every time: a new one is cached once its outputs are listed.
ARTIFACTS: dict[str, Artifacts] = {
    "cpp": Artifacts(("main",), ("main",), ("main",)),
    "c": Artifacts(("main",), ("main",), ("main",)),
    "rust": Artifacts(("main",), ("main",), ("main",)),
    "go": Artifacts(("main",), ("main",), ("main",)),
    "go_test": Artifacts(("main.test", "go.mod"), ("main.test",), ("main.test",)),
    "java": Artifacts(("*.class",), ("Main.class",)),
    "junit": Artifacts(("*.class",), ()),
}


@dataclass(frozen=True, slots=True)
class Entry:
    files: dict[str, bytes]
    executable: tuple[str, ...]
    counted_s: float  # the compile's time as a limit counts it: min(cpu, wall)


@dataclass(frozen=True, slots=True)
class Pending:
    """A compile whose program is to be stored once the reply is in."""

    key: str
    language: str
    compile: Run
    snapshot: Snapshot
    inputs: frozenset[str]


class CompileCache:
    """Entries under `root/<key>/`: the program's files and `entry.json`."""

    def __init__(self, root: Path, budget_bytes: int) -> None:
        self.root = root
        self.budget_bytes = budget_bytes

    def get(self, key: str) -> Entry | None:
        directory = self.root / key
        try:
            meta = json.loads((directory / "entry.json").read_text())
            files = {}
            for path, digest in meta["files"].items():
                data = (directory / "files" / path).read_bytes()
                if hashlib.sha256(data).hexdigest() != digest:
                    log.warning("compile cache %s: %s does not match its digest", key, path)
                    return None
                files[path] = data
            os.utime(directory)  # recently used
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("compile cache %s: unreadable entry (%s)", key, exc)
            return None
        return Entry(files, tuple(meta["executable"]), float(meta["counted_s"]))

    def put(self, key: str, entry: Entry) -> None:
        if (self.root / key).exists():
            return
        staging = self.root / f".staging-{secrets.token_hex(8)}"
        try:
            (staging / "files").mkdir(parents=True, mode=0o700)
            for path, data in entry.files.items():
                target = staging / "files" / path
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                target.write_bytes(data)
            meta = {
                "files": {p: hashlib.sha256(d).hexdigest() for p, d in entry.files.items()},
                "executable": list(entry.executable),
                "counted_s": entry.counted_s,
            }
            (staging / "entry.json").write_text(json.dumps(meta))
            staging.rename(self.root / key)  # whole or not at all; another worker's first wins
        except OSError as exc:
            if not (self.root / key).exists():
                log.warning("compile cache %s: not stored (%s)", key, exc)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.evict()

    def evict(self) -> None:
        """Remove the least recently used entries until the whole fits the budget."""
        entries = []
        for directory in self.root.iterdir():
            if directory.name.startswith("."):  # staging: a worker that died left it
                self._remove_stale(directory)
                continue
            try:
                size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
                entries.append((directory.stat().st_mtime, size, directory))
            except OSError:  # evicted by another worker meanwhile
                continue
        total = sum(size for _, size, _ in entries)
        for _, size, directory in sorted(entries):
            if total <= self.budget_bytes:
                break
            shutil.rmtree(directory, ignore_errors=True)
            total -= size

    @staticmethod
    def _remove_stale(staging: Path) -> None:
        try:
            stale = time.time() - staging.stat().st_mtime > STALE_STAGING_S
        except OSError:
            return
        if stale:
            shutil.rmtree(staging, ignore_errors=True)


@cache
def host_cache(root: Path | None, budget_mb: int) -> CompileCache | None:
    """This process's cache, or None when it is off or its directory is not ours alone."""
    if budget_mb <= 0:
        return None
    candidates = (
        [root]
        if root is not None
        else [
            Path.home() / ".cache" / "proctor" / "compile",
            Path(tempfile.gettempdir()) / f"proctor-compile-{os.getuid()}",  # a read-only home
        ]
    )
    for directory in candidates:
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            info = directory.stat()
            break
        except OSError as exc:
            log.warning("compile cache: %s cannot be made (%s)", directory, exc)
    else:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        # another user could plant programs there
        log.warning("compile cache off: %s is not this user's alone", directory)
        return None
    return CompileCache(directory, budget_mb << 20)


def settings_cache(settings: Settings) -> CompileCache | None:
    return host_cache(settings.compile_cache_dir, settings.compile_cache_mb)


def workspace_inputs(task: TaskSpec, solution: Solution) -> dict[str, str]:
    """The workspace's files when the compiler runs, as path -> SHA-256 of the content."""
    files: dict[str, str | bytes] = dict(task.files)
    files.update({p: b"binary:" + d.encode() for p, d in task.tests.binary_files.items()})
    if task.language not in TESTS_AFTER_COMPILE:
        files.update(task.tests.files)
    files.update(solution.files)
    return {
        path: hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()
        for path, data in files.items()
    }


def input_bytes(task: TaskSpec, solution: Solution) -> int:
    texts = [*task.files.values(), *task.tests.files.values(), *solution.files.values()]
    binary = task.tests.binary_files.values()
    return sum(len(t.encode()) for t in texts) + sum(len(b) * 3 // 4 for b in binary)


def cache_key(
    task: TaskSpec, solution: Solution, compile_run: Run, image_digest: str
) -> str | None:
    """The entry a compile's program is stored under, or None: this one is not cached."""
    if (
        task.language not in ARTIFACTS
        or solution.actions
        or task.setup
        or task.repo is not None
        or not image_digest
        or input_bytes(task, solution) > MAX_INPUT_BYTES
    ):
        return None
    limits = task.limits
    identity = {
        "format": FORMAT,
        "image": image_digest,
        "language": task.language,
        "command": compile_run.command,
        "env": {k: v for k, v in compile_run.env.items() if k != "HOME"},
        "limits": [limits.memory_mb, limits.pids, limits.disk_mb],
        "files": workspace_inputs(task, solution),
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def with_cache(
    cache: CompileCache | None,
    plan: GradingPlan,
    task: TaskSpec,
    solution: Solution,
    image_digest: str | None,
) -> tuple[GradingPlan, Pending | None]:
    """The plan with its compile answered from the cache (a hit), or followed by reading
    its program back (a miss: `store` it once the reply is in)."""
    compile_run = plan.compile
    if cache is None or compile_run is None or compile_run not in plan.ops:
        return plan, None
    if task.tests.format is TestFormat.cases:
        # a judged run's memory limit is a verdict per case: with the program sent in the
        # request, the pooled server held its copies in the memory the cases ran out of,
        # and a case that exhausted it took the server down with it (no verdicts)
        return plan, None
    key = cache_key(task, solution, compile_run, image_digest or "")
    if key is None:
        return plan, None
    at = plan.ops.index(compile_run)
    entry = cache.get(key)
    if entry is not None and entry.counted_s <= (compile_run.cpu_limit_s or 0.0):
        written = Write(
            binary={p: base64.b64encode(d).decode("ascii") for p, d in entry.files.items()},
            executable=list(entry.executable),
        )
        # the compile step's result is still a run's, of a command that does nothing
        done = Run(**{**compile_run.wire(), "command": ":"})
        ops = [*plan.ops[:at], written, done, *plan.ops[at + 1 :]]
        log.debug("compile cache hit %s", key)
        return dataclasses.replace(plan, ops=ops, compile=done), None
    # a miss: every process of the sandbox killed, then the program read back before it runs
    snapshot = Snapshot(paths=["."], max_bytes=MAX_ARTIFACT_BYTES, keep_going=True)
    ops = [*plan.ops[: at + 1], KillAll(), snapshot, *plan.ops[at + 1 :]]
    pending = Pending(
        key=key,
        language=task.language or "",
        compile=compile_run,
        snapshot=snapshot,
        inputs=frozenset(workspace_inputs(task, solution)),
    )
    return dataclasses.replace(plan, ops=ops), pending


def store(cache: CompileCache | None, pending: Pending | None, reply: Results) -> None:
    """Store the program of a compile that succeeded (`with_cache`'s miss)."""
    if cache is None or pending is None:
        return
    compiled = reply.result(pending.compile)
    snapshot = reply.result(pending.snapshot)
    if compiled is None or compiled.timed_out or compiled.exit_code != 0:
        return
    if not isinstance(snapshot, SnapshotResult):
        return
    files = program_files(pending, snapshot)
    if files is None:
        return
    counted = compiled.duration_s
    if compiled.cpu_s is not None:
        counted = min(compiled.cpu_s, counted)
    artifacts = ARTIFACTS[pending.language]
    try:
        cache.put(pending.key, Entry(files, artifacts.executable, counted))
    except OSError as exc:  # a cache that cannot be written costs a compile, never an episode
        log.warning("compile cache %s: not stored (%s)", pending.key, exc)


def program_files(pending: Pending, snapshot: SnapshotResult) -> dict[str, bytes] | None:
    """The files the compile made (its language's artifacts), or None if one is missing."""
    found: dict[str, bytes] = {p: t.encode() for p, t in snapshot.files.items()}
    found.update({p: base64.b64decode(d) for p, d in snapshot.binary.items()})
    artifacts = ARTIFACTS[pending.language]
    made = {
        path: data
        for path, data in found.items()
        if path not in pending.inputs and any(_matches(path, p) for p in artifacts.patterns)
    }
    if not made or any(name not in made for name in artifacts.required):
        return None
    return made


def _matches(path: str, pattern: str) -> bool:
    if pattern.startswith("*"):  # a glob of top-level names
        return "/" not in path and fnmatch(path, pattern)
    return path == pattern
